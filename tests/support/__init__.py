"""Support code shared by the collection's tests (AMQP clients, local brokers)."""
