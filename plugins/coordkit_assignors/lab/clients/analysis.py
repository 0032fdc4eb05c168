"""What the ``real-clients`` processes recorded, read back: who owned which partition when, every
record received, every record acknowledged; and the steps the workload reports from them.

Each step covers a window of the run: step 0 from the consumers' start to the first event, step
``k`` from event ``k`` to the next (the last one to the end of the run). In a window:

* ``rebalance_seconds``: from the event until the last partition without an owner got one again
  (0 when none lost its owner). A partition is owned while a running consumer holds it (assigned,
  not yet revoked or lost): a consumer killed with SIGKILL owns nothing from the kill on, though
  the group coordinator notices only at its session timeout;
* ``disruption_seconds``: from the first partition losing its owner to the last getting one
  again (a join's rebalance without the new process's start-up);
* ``unowned_seconds``: partition-seconds without an owner;
* ``revocations``: partitions taken from a consumer (its rebalance listener's revoked and lost
  callbacks): an eager rebalance revokes every partition of every member, a cooperative one or
  the consumer protocol only those that move; a consumer leaving gives up its own;
* ``owned_at_end``: partitions a running consumer held at the window's end (all of them, once
  the group settled);
* ``consumed_twice``: deliveries in the window of a record some consumer had already received;
* ``lost``: acknowledged records sent in the window that no consumer ever received;
* ``latencies``: for the records sent in the window, seconds from send to first receipt.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs
import numpy as np

from coordkit.lab.processes import ProcessLog, RunEvent, acknowledged

CLIENTS_KIND = "clients"


#: One consumer process's log (its lines, when it started and stopped).
ConsumerLog = ProcessLog


@attrs.frozen
class ClientStep:
    """One window of a ``real-clients`` run (see the module's description)."""

    index: int
    event: str
    event_kind: str
    members: int  # consumers running at the end of the window
    partitions: int
    strategy: str
    rebalance_seconds: float
    disruption_seconds: float
    unowned_seconds: float
    revocations: int
    owned_at_end: int
    consumed_twice: int
    sent: int  # acknowledged records sent in the window
    lost: int
    latencies: tuple[float, ...] = attrs.field(repr=False)
    kind: str = CLIENTS_KIND

    def latency_ms(self, quantile: float) -> float | None:
        if not self.latencies:
            return None
        return float(np.quantile(np.asarray(self.latencies), quantile)) * 1000.0


@attrs.frozen
class Receipt:
    time: float
    seq: int
    sent: float


def _numbers(words: Sequence[str]) -> list[int]:
    return [] if words == ["-"] else [int(w) for w in words[0].split(",")]


def ownership(log: ConsumerLog, end: float) -> dict[int, list[tuple[float, float]]]:
    """Per partition, the intervals in which this consumer held it (``end``: the run's end)."""
    stop = end if log.ended is None else min(end, log.ended)
    held: dict[int, float] = {}
    out: dict[int, list[tuple[float, float]]] = {}
    for line in log.lines:
        words = line.split()
        if words[:1] not in (["assigned"], ["revoked"], ["lost"]) or len(words) != 3:
            continue
        at = min(float(words[1]), stop)
        if words[0] == "assigned":
            for p in _numbers(words[2:]):
                held.setdefault(p, at)
        else:
            for p in _numbers(words[2:]):
                if p in held:
                    out.setdefault(p, []).append((held.pop(p), at))
    for p, since in held.items():
        out.setdefault(p, []).append((since, stop))
    return out


def revocation_times(log: ConsumerLog) -> list[float]:
    """When this consumer gave up a partition (revoked or lost), one time per partition."""
    out = []
    for line in log.lines:
        words = line.split()
        if words[:1] in (["revoked"], ["lost"]) and len(words) == 3:
            out += [float(words[1])] * len(_numbers(words[2:]))
    return out


def receipts(log: ConsumerLog) -> list[Receipt]:
    out = []
    for line in log.lines:
        words = line.split()
        if words[:1] == ["r"] and len(words) == 6:
            out.append(
                Receipt(
                    float(words[1]),
                    int(words[4]),
                    float(words[5]),
                )
            )
    return out


def unowned_intervals(
    held: Iterable[tuple[float, float]], start: float, end: float
) -> list[tuple[float, float]]:
    """The parts of ``[start, end)`` no interval of ``held`` covers."""
    gaps = []
    at = start
    for since, until in sorted(held):
        if since > at:
            gaps.append((at, min(since, end)))
        at = max(at, until)
        if at >= end:
            break
    if at < end:
        gaps.append((at, end))
    return [(a, b) for a, b in gaps if b > a]


def steps(
    *,
    strategy: str,
    partitions: int,
    consumers: Sequence[ConsumerLog],
    producer: Iterable[str],
    events: Sequence[RunEvent],
    start: float,
    end: float,
) -> list[ClientStep]:
    """The run's steps: ``events[0]`` is the start of consuming (step 0), the others the events."""
    held: dict[int, list[tuple[float, float]]] = {p: [] for p in range(partitions)}
    for log in consumers:
        for p, intervals in ownership(log, end).items():
            held.setdefault(p, []).extend(intervals)
    gaps = [gap for p in range(partitions) for gap in unowned_intervals(held[p], start, end)]
    everything = sorted(
        (r for log in consumers for r in receipts(log)), key=lambda r: (r.time, r.seq)
    )
    first: dict[int, Receipt] = {}
    repeats: list[float] = []
    for receipt in everything:
        if receipt.seq in first:
            repeats.append(receipt.time)
        else:
            first[receipt.seq] = receipt
    acked = acknowledged(producer)
    revoked = [t for log in consumers for t in revocation_times(log)]
    out = []
    bounds = [e.time for e in events[1:]] + [end]
    for index, (event, until) in enumerate(zip(events, bounds, strict=True)):
        since = event.time
        window_gaps = [(max(a, since), min(b, until)) for a, b in gaps if b > since and a < until]
        unowned = sum(b - a for a, b in window_gaps)
        restored = max((b for _, b in window_gaps), default=since)
        disrupted = min((a for a, _ in window_gaps), default=restored)
        in_window = [seq for seq, sent in acked.items() if since <= sent < until]
        if index == len(events) - 1:  # the last window takes whatever came after it too
            in_window += [seq for seq, sent in acked.items() if sent >= until]
        if index == 0:
            in_window += [seq for seq, sent in acked.items() if sent < since]
        latencies = tuple(first[s].time - acked[s] for s in in_window if s in first)
        last = index == len(events) - 1
        unowned_at_end = {
            p for p in range(partitions) for a, b in unowned_intervals(held[p], start, end)
            if a < until <= b
        }  # fmt: skip
        running = sum(
            1 for c in consumers if c.started <= until and (c.ended is None or c.ended >= until)
        )
        out.append(
            ClientStep(
                index=index,
                event=event.label,
                event_kind=event.kind,
                members=running,
                partitions=partitions,
                strategy=strategy,
                rebalance_seconds=restored - since,
                disruption_seconds=restored - disrupted,
                unowned_seconds=unowned,
                revocations=sum(1 for t in revoked if since <= t and (last or t < until)),
                owned_at_end=partitions - len(unowned_at_end),
                consumed_twice=sum(1 for t in repeats if since <= t < until)
                + (sum(1 for t in repeats if t >= until) if index == len(events) - 1 else 0),
                sent=len(in_window),
                lost=sum(1 for s in in_window if s not in first),
                latencies=latencies,
            )
        )
    return out
