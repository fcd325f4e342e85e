"""A broker's queues for the reconciliation modules' unit tests: browse, the removals by filter (applied with the
test's own reading of the filter, ``matches(filter, message)``) and by id, and a record of the removals."""


class StubQueues:
    matches = None  # (message_filter, message) -> bool, set by each test module

    def __init__(self, queues):
        self.contents = queues  # queue name -> [message]
        self.in_delivery = {}  # queue name -> [message], delivered and not acknowledged
        self.calls = []

    def browse(self, address, queue, message_filter="", page_size=200, routing_type="anycast"):
        return list(self.contents[queue])

    def scheduled(self, address, queue, routing_type="anycast"):
        return []

    def delivering(self, address, queue, routing_type="anycast"):
        return list(self.in_delivery.get(queue, []))

    def remove_messages(self, address, queue, message_filter, routing_type="anycast"):
        self.calls.append(("filter", queue))
        before = self.contents[queue]
        self.contents[queue] = [m for m in before if not type(self).matches(message_filter, m)]
        return len(before) - len(self.contents[queue])

    def remove_message(self, address, queue, message_id, routing_type="anycast"):
        self.calls.append(("id", queue, message_id))
        before = self.contents[queue]
        self.contents[queue] = [m for m in before if m["messageID"] != message_id]
        return len(before) != len(self.contents[queue])
