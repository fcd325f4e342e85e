"""Measure replication lag, RPO and RTO of an Artemis estate from telemetry, drill ledgers and event logs."""
