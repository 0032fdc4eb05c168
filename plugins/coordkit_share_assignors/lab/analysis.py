"""What the ``share-groups`` processes recorded, read back, and the steps the workload reports.

A share consumer's log (:mod:`.consumer`) has one line per record it got and one per
acknowledgement the brokers answered:

* ``d TIME PARTITION OFFSET DELIVERY_COUNT SEQ SENT ACTION``: a delivery (``DELIVERY_COUNT`` is the
  brokers' count; ``ACTION`` what the member does with it: ``accept``, ``release``, ``reject``, or
  ``hold`` when it stalls with the record, acknowledging it only after the stall);
* ``k TIME SEQ PARTITION OFFSET ACTION ok|failed``: the answer to that acknowledgement;
* ``stall TIME SECONDS`` and ``resume TIME``.

The producer's log has ``a SEQ PARTITION OFFSET SENT`` per acknowledged record.

Each step covers a window of the run (step 0 from the consumers' start to the first event, step
``k`` from event ``k`` to the next, the last one to the end). In a window:

* ``rates``: records delivered per second to each member running at the window's end, over the
  part of the window it ran (``balance_cv``: their coefficient of variation);
* ``redeliveries``: deliveries beyond a record's first (the brokers' delivery count above 1, or a
  record seen before);
* ``held_past_lock``: redeliveries whose previous delivery was not released: the acquisition
  lapsed (its member stalled, was killed, or left without acknowledging);
* ``duplicates_accepted``: acceptances the brokers confirmed for a record already accepted;
* ``lost``: acknowledged records sent in the window that no member accepted or rejected (0 is
  right: rejected records are archived on purpose), but for ``unconfirmed`` ones;
* ``unconfirmed``: records unsettled but delivered to a member killed before it logged the
  brokers' answer to its acknowledgement (the brokers may have applied it: then nobody gets them
  again; else they come back after their lock and are settled);
* latencies: send → first delivery, and send → acceptance, for the records sent in the window.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import attrs
import numpy as np

from coordkit.lab.processes import ProcessLog, RunEvent, acknowledged

SHARE_KIND = "share-groups"
ACTIONS = ("accept", "release", "reject", "hold")


#: One share consumer process's log (its lines, when it started and stopped).
MemberLog = ProcessLog


@attrs.frozen
class Delivery:
    member: str
    time: float
    partition: int
    offset: int
    count: int
    seq: int
    sent: float
    action: str


@attrs.frozen
class Acknowledgement:
    member: str
    time: float
    seq: int
    action: str
    ok: bool


@attrs.frozen
class ShareStep:
    """One window of a ``share-groups`` run (see the module's description)."""

    index: int
    event: str
    event_kind: str
    members: int  # consumers running at the end of the window
    partitions: int
    strategy: str
    rates: tuple[float, ...]
    deliveries: int
    redeliveries: int
    released: int
    rejected: int
    held_past_lock: int
    duplicates_accepted: int
    sent: int  # acknowledged records sent in the window
    lost: int
    unconfirmed: int
    delivery_latencies: tuple[float, ...] = attrs.field(repr=False)
    accept_latencies: tuple[float, ...] = attrs.field(repr=False)
    kind: str = SHARE_KIND

    @property
    def balance_cv(self) -> float | None:
        """Coefficient of variation of the members' delivery rates (``None``: fewer than two
        members, or nothing delivered)."""
        if len(self.rates) < 2 or not any(self.rates):
            return None
        rates = np.asarray(self.rates)
        return float(rates.std() / rates.mean())

    def delivery_latency_ms(self, quantile: float) -> float | None:
        return _quantile_ms(self.delivery_latencies, quantile)

    def accept_latency_ms(self, quantile: float) -> float | None:
        return _quantile_ms(self.accept_latencies, quantile)


def _quantile_ms(values: tuple[float, ...], quantile: float) -> float | None:
    if not values:
        return None
    return float(np.quantile(np.asarray(values), quantile)) * 1000.0


class LogFormatError(ValueError):
    """A log line that is not one of the formats above (a process wrote garbage)."""


def parse_member(log: MemberLog) -> tuple[list[Delivery], list[Acknowledgement]]:
    """A member's deliveries and acknowledgement answers; other lines (stalls) are skipped."""
    deliveries, acks = [], []
    for number, line in enumerate(log.lines, 1):
        words = line.split()
        try:
            if words[:1] == ["d"] and len(words) == 8 and words[7] in ACTIONS:
                deliveries.append(
                    Delivery(
                        log.name, float(words[1]), int(words[2]), int(words[3]), int(words[4]),
                        int(words[5]), float(words[6]), words[7],
                    )
                )  # fmt: skip
            elif words[:1] == ["k"] and len(words) == 7 and words[6] in ("ok", "failed"):
                acks.append(
                    Acknowledgement(
                        log.name, float(words[1]), int(words[2]), words[5], words[6] == "ok"
                    )
                )
            elif words[:1] in (["d"], ["k"]):
                raise ValueError("wrong number of fields or an unknown action")
        except ValueError as exc:
            raise LogFormatError(f"{log.name}'s log, line {number}: {line!r}: {exc}") from None
    return deliveries, acks


def _running(log: MemberLog, since: float, until: float) -> float:
    """Seconds of ``[since, until)`` the member ran."""
    stop = until if log.ended is None else min(until, log.ended)
    return max(0.0, stop - max(since, log.started))


def steps(
    *,
    strategy: str,
    partitions: int,
    members: Sequence[MemberLog],
    producer: Iterable[str],
    events: Sequence[RunEvent],
    end: float,
) -> list[ShareStep]:
    """The run's steps: ``events[0]`` is the consumers' start (step 0), the others the events."""
    deliveries: list[Delivery] = []
    acks: list[Acknowledgement] = []
    for log in members:
        got, answered = parse_member(log)
        deliveries += got
        acks += answered
    deliveries.sort(key=lambda d: (d.time, d.seq))
    acks.sort(key=lambda a: (a.time, a.seq))
    # Per delivery: a redelivery? and was the previous one of its record released?
    previous: dict[int, Delivery] = {}
    redelivered: list[Delivery] = []
    lapsed: list[Delivery] = []
    first_delivery: dict[int, float] = {}
    for d in deliveries:
        before = previous.get(d.seq)
        if before is not None or d.count > 1:
            redelivered.append(d)
            if before is None or before.action != "release":
                lapsed.append(d)
        first_delivery.setdefault(d.seq, d.time)
        previous[d.seq] = d
    confirmed = {(a.member, a.seq) for a in acks}
    ended = {log.name for log in members if log.ended is not None}
    # A killed member's last acknowledgements may have been applied without its log saying so.
    unknown = {
        d.seq for d in deliveries if d.member in ended and (d.member, d.seq) not in confirmed
    }
    accepted: dict[int, float] = {}
    settled: set[int] = set()
    duplicates: list[float] = []
    for a in acks:
        if not a.ok or a.action not in ("accept", "hold", "reject"):
            continue
        settled.add(a.seq)
        if a.action == "reject":
            continue
        if a.seq in accepted:
            duplicates.append(a.time)
        else:
            accepted[a.seq] = a.time
    acked = acknowledged(producer)
    out = []
    bounds = [e.time for e in events[1:]] + [end]
    last = len(events) - 1
    for index, (event, until) in enumerate(zip(events, bounds, strict=True)):
        since = event.time
        hi = float("inf") if index == last else until

        def within(t: float, lo: float = since if index else float("-inf"), up: float = hi) -> bool:
            return lo <= t < up

        in_window = [seq for seq, sent in acked.items() if within(sent)]
        window = [d for d in deliveries if within(d.time)]
        alive = [m for m in members if m.started <= until and (m.ended is None or m.ended >= until)]
        per_member: dict[str, int] = defaultdict(int)
        for d in window:
            per_member[d.member] += 1
        rates = []
        for m in alive:
            seconds = _running(m, since, until)
            if seconds > 0:
                rates.append(per_member[m.name] / seconds)
        out.append(
            ShareStep(
                index=index,
                event=event.label,
                event_kind=event.kind,
                members=len(alive),
                partitions=partitions,
                strategy=strategy,
                rates=tuple(rates),
                deliveries=len(window),
                redeliveries=sum(1 for d in redelivered if within(d.time)),
                released=sum(1 for d in window if d.action == "release"),
                rejected=sum(1 for d in window if d.action == "reject"),
                held_past_lock=sum(1 for d in lapsed if within(d.time)),
                duplicates_accepted=sum(1 for t in duplicates if within(t)),
                sent=len(in_window),
                lost=sum(1 for s in in_window if s not in settled and s not in unknown),
                unconfirmed=sum(1 for s in in_window if s not in settled and s in unknown),
                delivery_latencies=tuple(
                    first_delivery[s] - acked[s] for s in in_window if s in first_delivery
                ),
                accept_latencies=tuple(accepted[s] - acked[s] for s in in_window if s in accepted),
            )
        )
    return out
