"""One engine broker in a process of its own, for ``bench_process_failover`` (not an area).

    python failover_broker.py URL BROKER_ID STRATEGY CRASH_BROKER

It starts broker ``BROKER_ID`` on the store at ``URL`` with the controller election ``STRATEGY``
and prints one JSON object a line on stdout, each with ``at`` (``time.monotonic()``: the system's
CLOCK_MONOTONIC, comparable across processes of one machine):

* ``{"event": "started"}`` once registered (it enters the controller election on ``campaign``);
* ``{"event": "image", "current": bool, "gc_tracked": N}`` when its warm-standby image becomes
  current (with the objects the garbage collector then tracks) or stops being so (cold
  strategies keep no image and never print it);
* ``{"event": "elected", "epoch": E}`` when it wins the controller election;
* ``{"event": "ready", "epoch": E, "seconds": S, "phases": {...}, "reads": R, "writes": W}`` when
  its controller's first pass is done (store operations since it was elected);
* ``{"event": "idle", "epoch": E}`` each time its controller (polled every 5 ms) is seen to have
  nothing left to do after it had, or first in a term;
* ``{"event": "crash-led", "count": N}`` each time its controller's writes change how many
  partitions of topic ``crash`` are led by a broker other than ``CRASH_BROKER``.

* ``{"event": "shut-down", "broker": B, "started": T, "seconds": S, "idle": I, "led": L,
  "followed": F, "still_led": N, "reads": R, "writes": W}`` once, as the controller, it answered
  broker ``B``'s controlled-shutdown request (S seconds) and then had nothing left to do (I);
  ``error`` instead when it is not the controller.

Commands on stdin, one a line: ``campaign`` enters the controller election; ``crash`` ends the
store session at once (its ephemeral nodes go, as when a crashed broker's session expires) and
stops the process (SIGSTOP) without any teardown: the benchmark kills it once the case is measured
(a crashed broker's exit happens on its own machine; here, freeing a 2,000,000-partition process's
memory would take one of the two cores for a tenth of a second, in the middle of the failover);
``exit`` stops the broker cleanly (no controlled shutdown) and exits;
``shutdown B``: as the controller, handle broker ``B``'s controlled-shutdown request. The engine
carries that request only between brokers of one process (Kafka sends it over the wire), so the
benchmark delivers it to the controller's process; what is measured is the controller's work.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_warm_failover import CRASH_TOPIC

from coordkit.engine import Broker, EngineConfig, EngineObserver
from coordkit.engine.events import Observers, StateChange
from coordkit.engine.instrument import InstrumentedStore
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.elections import ElectionKind

_out = threading.Lock()


def emit(event: str, **fields: object) -> None:
    line = json.dumps({"event": event, "at": time.monotonic(), **fields})
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Reporter(EngineObserver):
    def __init__(self, broker_id: int, crash: int, store: InstrumentedStore) -> None:
        self.broker_id = broker_id
        self.crash = crash
        self.store = store
        self.lock = threading.Lock()
        self.elsewhere: set[int] = set()
        self.base = store.counts
        #: The broker, once made: its controller's phase split is read when it is ready.
        self.broker: Broker | None = None

    def controller_changed(self, broker_id: int | None, epoch: int) -> None:
        if broker_id == self.broker_id:
            self.base = self.store.counts
            emit("elected", epoch=epoch)

    def controller_ready(self, broker_id: int, epoch: int, seconds: float) -> None:
        if broker_id != self.broker_id:
            return
        ops = self.store.counts - self.base
        emit(
            "ready",
            epoch=epoch,
            seconds=seconds,
            phases=self._phases(),
            reads=ops.reads,
            writes=ops.writes,
        )

    def _phases(self) -> dict[str, float]:
        controller = None if self.broker is None else self.broker.controller
        return dict(controller.phases) if controller is not None else {}

    def partition_states_changed(self, changes: Sequence[StateChange]) -> None:
        with self.lock:
            before = len(self.elsewhere)
            for change in changes:
                if change.tp[0] != CRASH_TOPIC:
                    continue
                if change.current.leader not in (self.crash, -1):
                    self.elsewhere.add(change.tp[1])
                else:
                    self.elsewhere.discard(change.tp[1])
            if len(self.elsewhere) != before:
                emit("crash-led", count=len(self.elsewhere))


def watch(broker: Broker) -> None:
    """Reports the image's currency and the controller's first idle moment (polled)."""
    current: bool | None = None
    idle: tuple[int, bool] = (-1, False)  # (epoch, idle) last seen
    while broker.alive:
        image = getattr(broker._candidate, "image", None)
        if image is not None and image.current != current:
            current = bool(image.current)
            # Objects the garbage collector tracks: a full collection walks them all, at any
            # moment (a failover included), so they should not grow with the partitions.
            emit("image", current=current, gc_tracked=len(gc.get_objects()) if current else None)
        controller = broker.controller
        if controller is not None:
            now = (controller.epoch, controller.idle())
            if now[1] and now != idle:
                emit("idle", epoch=now[0])
            idle = now
        time.sleep(0.005)


def count_for_shutdown(broker: Broker, target: int) -> tuple[int, int] | None:
    """What broker ``target`` leads and follows, by this broker's controller (a copy of every
    state: done before the shutdown's clock and CPU window start), then a full collection."""
    controller = broker.controller
    if controller is None or not controller.active:
        emit("counted", broker=target, error=f"broker {broker.broker_id} is not the controller")
        return None
    states = controller.leaders().result()
    led = sum(1 for s in states.values() if s is not None and s.leader == target)
    followed = sum(
        1 for s in states.values() if s is not None and s.leader != target and target in s.isr
    )
    del states
    gc.collect()
    emit("counted", broker=target, led=led, followed=followed)
    return led, followed


def shut_down(
    broker: Broker, target: int, store: InstrumentedStore, counted: tuple[int, int] | None
) -> None:
    """Answer broker ``target``'s controlled-shutdown request as this broker's controller."""
    controller = broker.controller
    if controller is None or not controller.active or counted is None:
        emit("shut-down", broker=target, error=f"broker {broker.broker_id} is not the controller")
        return
    led, followed = counted
    base = store.counts
    started = time.monotonic()
    remaining = controller.controlled_shutdown(target).result()
    seconds = time.monotonic() - started
    ops = store.counts - base
    while controller.active and not controller.idle():  # the passes its writes set off
        time.sleep(0.005)
    idle = time.monotonic() - started
    emit(
        "shut-down",
        broker=target,
        started=started,
        seconds=seconds,
        idle=idle,
        led=led,
        followed=followed,
        still_led=len(remaining),
        reads=ops.reads,
        writes=ops.writes,
    )


def defer_candidacy(campaign: threading.Event) -> None:
    """Brokers register at once but enter the controller election only on ``campaign``: the
    benchmark lets the dedicated controller win first, with every other broker registered (a
    controller elected alone would elect leaders among whoever is up)."""
    manager = get_plugin_manager()
    real = manager.election

    def election(kind: str, name: str) -> Any:
        chosen = real(kind, name)
        if kind != ElectionKind.CONTROLLER.value:
            return chosen

        class Deferred:
            def candidate(self, *args: Any, **kwargs: Any) -> Any:
                candidate = chosen.candidate(*args, **kwargs)
                start = candidate.start

                def after_campaign() -> None:
                    campaign.wait()
                    start()

                candidate.start = lambda: threading.Thread(target=after_campaign).start()
                return candidate

        return Deferred()

    manager.election = election  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    url, broker_id, strategy, crash = argv[0], int(argv[1]), argv[2], int(argv[3])
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    store = InstrumentedStore(get_plugin_manager().store_for(url), f"broker-{broker_id}")
    reporter = Reporter(broker_id, crash, store)
    # Each controller pass's split goes to the broker's log (--log-dir).
    logging.getLogger("coordkit.engine.controller").setLevel(logging.DEBUG)
    config = EngineConfig(
        controller_election=strategy, auto_leader_rebalance=False, controlled_shutdown_timeout=600
    )
    campaign = threading.Event()
    defer_candidacy(campaign)
    broker = Broker(broker_id, store, config=config, observers=Observers(reporter))
    reporter.broker = broker
    broker.start()
    emit("started")
    threading.Thread(target=watch, args=(broker,), daemon=True).start()
    counts: dict[int, tuple[int, int] | None] = {}  # by target: what it leads and follows
    for line in sys.stdin:
        command = line.strip()
        if command == "campaign":
            campaign.set()
        if command == "crash":
            store.inner.close()
            os.kill(os.getpid(), signal.SIGSTOP)
            os._exit(0)  # (if continued)
        if command.startswith("count "):
            target = int(command.split()[1])
            counts[target] = count_for_shutdown(broker, target)
        if command.startswith("shutdown "):
            target = int(command.split()[1])
            threading.Thread(
                target=shut_down, args=(broker, target, store, counts.get(target)), daemon=True
            ).start()
        if command == "exit":
            broker.stop(controlled=False)
            os._exit(0)
    broker.kill()  # stdin closed: the benchmark is gone
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
