"""plugins/module_utils/amqp_ledger.py without a broker (its clients against real brokers: tests/integration/test_load_clients.py)."""

import pytest

from support import amqp_clients as amqp


def test_wait_for_returns_the_value_and_reports_the_last_one_on_timeout():
    values = iter([0, [], [1], [1, 2]])
    assert amqp.wait_for(lambda: next(values), timeout=5, interval=0.01) == [1]

    values = iter(range(100))
    assert amqp.wait_for(lambda: next(values), lambda v: v >= 3, timeout=5, interval=0.01) == 3
    assert amqp.wait_for(lambda: 7, 1, 0.01) == 7  # positional timeout, interval

    with pytest.raises(AssertionError, match=r"last value: \(2 items\) \['a', 'b'\]"):
        amqp.wait_for(lambda: ["a", "b"], lambda v: len(v) > 2, timeout=0.2, interval=0.05)

    def broken():
        raise ConnectionRefusedError("nobody home")
    with pytest.raises(AssertionError, match="ConnectionRefusedError: nobody home"):
        amqp.wait_for(broken, timeout=0.2, interval=0.05)
