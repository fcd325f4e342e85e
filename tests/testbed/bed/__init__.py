"""The test bed's code, which the command tests/testbed/testbed runs (bed.cli.main). Its modules, each built on the
ones before it: config (settings, paths, TestbedError), topology (nodes and their addresses), helpers (commands, files,
state, lock), processes, network (namespaces, router, faults), toxiproxy, inventory, services (ZooKeeper, LDAP),
rootfs (node disks), power (start, stop, a plain node's init) and cli (the subcommands).
"""
