"""The session keeper every store backend shares: its transitions and its listener fan-out."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordkit.store import SessionKeeper, SessionState
from coordkit.store.watches import EventThread

CONNECTED = SessionState.CONNECTED
SUSPENDED = SessionState.SUSPENDED
LOST = SessionState.LOST
CLOSED = SessionState.CLOSED


class Heard:
    """A session listener that keeps what it hears and the thread it heard it on."""

    def __init__(self) -> None:
        self.states: list[SessionState] = []
        self.threads: set[threading.Thread] = set()

    def __call__(self, state: SessionState) -> None:
        self.states.append(state)
        self.threads.add(threading.current_thread())


@pytest.fixture
def events() -> Iterator[EventThread]:
    thread = EventThread("test-session-keeper")
    yield thread
    thread.stop()


def test_a_change_reaches_every_listener_on_the_event_thread(events: EventThread) -> None:
    keeper = SessionKeeper(events)
    first, second = Heard(), Heard()
    keeper.add_listener(first)
    keeper.add_listener(second)
    assert keeper.change_state(SUSPENDED)
    assert keeper.change_state(CONNECTED)
    assert events.flush()
    assert first.states == second.states == [SUSPENDED, CONNECTED]
    assert first.threads == {events._thread}
    assert keeper.state is CONNECTED


def test_the_same_state_again_is_no_change(events: EventThread) -> None:
    keeper = SessionKeeper(events)
    heard = Heard()
    keeper.add_listener(heard)
    assert not keeper.change_state(CONNECTED)
    assert events.flush()
    assert heard.states == []


def test_lost_then_a_new_session_is_heard_as_lost_then_connected(events: EventThread) -> None:
    keeper = SessionKeeper(events)
    heard = Heard()
    keeper.add_listener(heard)
    keeper.change_state(LOST)
    keeper.session_id = 7
    keeper.change_state(CONNECTED)
    assert events.flush()
    assert heard.states == [LOST, CONNECTED]
    assert keeper.session_id == 7


def test_closed_is_final(events: EventThread) -> None:
    keeper = SessionKeeper(events)
    heard = Heard()
    keeper.add_listener(heard)
    assert keeper.change_state(CLOSED)
    for state in (CONNECTED, SUSPENDED, LOST, CLOSED):
        assert not keeper.change_state(state)
    assert not keeper.suspend()
    assert events.flush()
    assert heard.states == [CLOSED]
    assert keeper.state is CLOSED


def test_suspend_moves_only_a_connected_session(events: EventThread) -> None:
    keeper = SessionKeeper(events)
    heard = Heard()
    keeper.add_listener(heard)
    assert keeper.suspend()
    assert not keeper.suspend()  # already SUSPENDED: not told twice
    keeper.change_state(LOST)
    assert not keeper.suspend()  # a late connection failure does not hide LOST
    assert keeper.state is LOST
    assert events.flush()
    assert heard.states == [SUSPENDED, LOST]


def test_a_keeper_can_start_suspended(events: EventThread) -> None:
    # A backend still connecting (ZooKeeper) starts SUSPENDED: a failure then changes nothing.
    keeper = SessionKeeper(events, state=SUSPENDED)
    assert keeper.state is SUSPENDED
    assert not keeper.suspend()
    assert keeper.change_state(CONNECTED)


def test_a_removed_listener_hears_nothing_more(events: EventThread) -> None:
    keeper = SessionKeeper(events)
    kept, removed = Heard(), Heard()
    keeper.add_listener(kept)
    keeper.add_listener(removed)
    keeper.change_state(SUSPENDED)
    keeper.remove_listener(removed)
    keeper.remove_listener(removed)  # removing one that is gone is harmless
    keeper.change_state(CONNECTED)
    assert events.flush()
    assert kept.states == [SUSPENDED, CONNECTED]
    assert removed.states == [SUSPENDED]


def test_a_failing_listener_does_not_keep_the_others_from_hearing(events: EventThread) -> None:
    keeper = SessionKeeper(events)
    heard = Heard()

    def failing(state: SessionState) -> None:
        raise RuntimeError("listener bug")

    keeper.add_listener(failing)
    keeper.add_listener(heard)
    keeper.change_state(SUSPENDED)
    assert events.flush()
    assert heard.states == [SUSPENDED]


class SlowPosting(EventThread):
    """An event thread whose posting lets other threads run first: a change told to listeners
    after another thread's later change would show."""

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        time.sleep(0.0001)
        super().post(fn, *args)


def test_racing_changes_reach_listeners_in_the_order_they_were_made() -> None:
    # Whatever the threads' interleaving, the last state a listener hears is the keeper's state.
    events = SlowPosting("test-session-keeper-slow")
    keeper = SessionKeeper(events)
    heard = Heard()
    keeper.add_listener(heard)
    start = threading.Barrier(4)

    def flap(state: SessionState) -> None:
        start.wait()
        for _ in range(200):
            keeper.change_state(state)

    threads = [threading.Thread(target=flap, args=(s,)) for s in (CONNECTED, SUSPENDED, LOST)]
    for thread in threads:
        thread.start()
    start.wait()
    for thread in threads:
        thread.join()
    assert events.flush()
    events.stop()
    assert heard.states[-1] is keeper.state
    assert all(a is not b for a, b in zip(heard.states, heard.states[1:], strict=False))
