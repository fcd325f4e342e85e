"""The measurement's one configuration error: a bad measurement file (collector, prober) or SLA file (job); its
message names the key and the file."""


class ConfigError(Exception):
    pass
