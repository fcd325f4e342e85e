"""artemis_drain_check's wait for a source whose clients go on acting (caught_up): done when what each link held at
its first look has been delivered, whatever arrived since; a link whose counters start again is looked at afresh."""

from ansible_collections.continuity.artemis.plugins.modules.artemis_drain_check import still_to_deliver

LINK = "dc2-node1/dc1_all"


def test_what_a_link_held_at_first_is_waited_for_and_what_arrived_since_is_not():
    marks = {}
    assert still_to_deliver({LINK: 40}, {LINK: 1000}, marks) == {LINK: 40}
    # 30 delivered, 25 new arrived: 10 of the first 40 are still to go.
    assert still_to_deliver({LINK: 35}, {LINK: 1030}, marks) == {LINK: 10}
    # The first 40 are across; the backlog under load is never empty, and need not be.
    assert still_to_deliver({LINK: 20}, {LINK: 1041}, marks) == {}


def test_an_empty_link_is_done_at_once():
    assert still_to_deliver({LINK: 0}, {LINK: 7}, {}) == {}


def test_a_link_whose_broker_restarted_is_marked_again_at_what_it_holds():
    marks = {}
    assert still_to_deliver({LINK: 40}, {LINK: 1000}, marks) == {LINK: 40}
    # The pair's backup took over: its counters start at 0, and it holds the journal's backlog.
    assert still_to_deliver({LINK: 50}, {LINK: 0}, marks) == {LINK: 50}
    assert still_to_deliver({LINK: 5}, {LINK: 50}, marks) == {}


def test_a_link_seen_only_later_is_marked_when_first_seen():
    marks = {}
    assert still_to_deliver({LINK: 0}, {LINK: 5}, marks) == {}
    other = "dc2-node1/continuity.out.books.dc1"
    assert still_to_deliver({LINK: 3, other: 8}, {LINK: 9, other: 2}, marks) == {other: 8}
