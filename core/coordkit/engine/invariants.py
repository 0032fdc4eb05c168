"""What a converged cluster looks like, checked against the store alone.

:func:`check_cluster` reads Kafka's layout from any store session (it never writes) and lists every
violation with the path it concerns:

* one readable ``/controller``, held by a registered broker, created by the very election that set
  ``/controller_epoch`` (same transaction, so the same zxid);
* every partition of every topic has a readable state; its ISR is a non-empty subset of its
  replicas and holds no dead broker, except the last replica rule (a leaderless partition keeps
  its last ISR member); its leader is live and in the ISR, or ``-1`` only when no ISR replica is
  live (with unclean election enabled for the topic: only when no replica is live);
* nothing pending: no topic queued for deletion, no reassignment or preferred-replica request,
  no ISR change notification left unconsumed;
* every node the check had to read is readable (an unreadable one is reported, never repaired).

:class:`Convergence` is truthy when nothing is wrong. Replicas that are live but outside the ISR
are not a violation (a follower may be catching up); they are listed as ``under_replicated``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import attrs

from coordkit.engine import isr_notifications, states
from coordkit.engine.config import UNCLEAN_LEADER_ELECTION_ENABLE
from coordkit.engine.controllership import (
    UnreadableControllerNodeError,
    read_controller,
    stored_controller_epoch,
)
from coordkit.engine.states import TP
from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.model import NO_LEADER
from coordkit.store import MetadataStore, Stat
from coordkit.store.paths import numeric_name
from coordkit.store.tree import children


@attrs.frozen
class Violation:
    """One broken invariant: the node it concerns and what is wrong with it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@attrs.frozen
class Convergence:
    """The outcome of :func:`check_cluster`; truthy when there is no violation.

    :param violations: every broken invariant, with its path.
    :param under_replicated: partitions with a live replica outside the ISR (not a violation).
    :param partitions: partitions checked.
    :param blocked_by: an unreadable controller node (also among the violations): no controller
        can be elected until someone clears it, so nothing converges by itself.
    """

    violations: tuple[Violation, ...] = ()
    under_replicated: tuple[TP, ...] = ()
    partitions: int = 0
    blocked_by: UnreadableControllerNodeError | None = None

    @property
    def ok(self) -> bool:
        return not self.violations

    def __bool__(self) -> bool:
        return self.ok

    def __iter__(self) -> Iterator[Violation]:
        return iter(self.violations)

    def __len__(self) -> int:
        return len(self.violations)

    def paths(self) -> list[str]:
        return [v.path for v in self.violations]

    def __str__(self) -> str:
        if self.ok:
            return f"converged ({self.partitions} partitions)"
        lines = [f"{len(self.violations)} violation(s):"]
        lines.extend(f"  {v}" for v in self.violations)
        return "\n".join(lines)


def check_cluster(store: MetadataStore, *, unclean_default: bool = False) -> Convergence:
    """Check every invariant above on what ``store`` holds now.

    :param unclean_default: the cluster-wide ``unclean.leader.election.enable`` (a topic's own
        config overrides it).
    """
    found: list[Violation] = []
    live = _registered_brokers(store, found)
    blocked_by = _check_controller(store, live, found)
    topics = children(store, layout.BROKER_TOPICS)
    deleting = set(children(store, layout.DELETE_TOPICS))
    for topic in sorted(deleting):
        found.append(Violation(layout.delete_topic_path(topic), "topic deletion is still pending"))
    for path in (layout.REASSIGN_PARTITIONS, layout.PREFERRED_REPLICA_ELECTION):
        if store.exists(path) is not None:
            found.append(Violation(path, "admin request is still pending"))
    for name in children(store, isr_notifications.ISR_CHANGE_NOTIFICATION):
        found.append(
            Violation(
                f"{isr_notifications.ISR_CHANGE_NOTIFICATION}/{name}",
                "ISR change notification not consumed by the controller",
            )
        )
    checked = [t for t in topics if t not in deleting]
    assignments = _assignments(store, checked, found)
    unclean = _unclean_settings(store, list(assignments), unclean_default, found)
    tps = [(t, p) for t, a in assignments.items() for p in sorted(a)]
    state_paths = [states.state_path(tp) for tp in tps]
    under: list[TP] = []
    for tp, path, result in zip(tps, state_paths, _get_many(store, state_paths), strict=True):
        if isinstance(result, NoNodeError):
            found.append(Violation(path, "partition has no state"))
            continue
        if isinstance(result, StoreError):
            found.append(Violation(path, f"unreadable ({result.message})"))
            continue
        try:
            state = states.decode_state(path, result[0], result[1].version)
        except LayoutError as exc:
            found.append(Violation(path, f"unreadable ({exc.detail})"))
            continue
        replicas = assignments[tp[0]][tp[1]]
        found.extend(_check_partition(path, replicas, state, live, unclean[tp[0]]))
        if any(r in live and r not in state.isr for r in replicas):
            under.append(tp)
    return Convergence(tuple(found), tuple(under), len(tps), blocked_by)


def _check_partition(
    path: str,
    replicas: tuple[int, ...],
    state: states.LeaderIsr,
    live: frozenset[int],
    unclean: bool,
) -> list[Violation]:
    out: list[Violation] = []
    isr = state.isr
    if not isr:
        out.append(Violation(path, "ISR is empty"))
    outside = [r for r in isr if r not in replicas]
    if outside:
        out.append(
            Violation(path, f"ISR {list(isr)} holds {outside}, not replicas {list(replicas)}")
        )
    dead = [r for r in isr if r not in live]
    last_replica = state.leader == NO_LEADER and len(isr) == 1
    if dead and not last_replica:
        out.append(Violation(path, f"ISR {list(isr)} holds dead broker(s) {dead}"))
    if state.leader == NO_LEADER:
        if unclean and any(r in live for r in replicas):
            alive = sorted(live & set(replicas))
            out.append(
                Violation(
                    path,
                    f"no leader although replicas {alive} are live and unclean election is enabled",
                )
            )
        elif any(r in live for r in isr):
            out.append(
                Violation(
                    path,
                    f"no leader although ISR member(s) {[r for r in isr if r in live]} are live",
                )
            )
    elif state.leader not in live:
        out.append(Violation(path, f"leader {state.leader} is not a registered broker"))
    elif state.leader not in isr:
        out.append(Violation(path, f"leader {state.leader} is not in the ISR {list(isr)}"))
    return out


def _check_controller(
    store: MetadataStore, live: frozenset[int], found: list[Violation]
) -> UnreadableControllerNodeError | None:
    """The controller invariants; returns the first unreadable controller node (each one is a
    violation too)."""
    unreadable: list[UnreadableControllerNodeError] = []
    try:
        current = read_controller(store)
    except UnreadableControllerNodeError as exc:
        unreadable.append(exc)
        current = None
    try:
        stored_epoch = stored_controller_epoch(store)
    except UnreadableControllerNodeError as exc:
        unreadable.append(exc)
        stored_epoch = None
    found.extend(Violation(exc.path, f"unreadable ({exc.detail})") for exc in unreadable)
    if unreadable:
        return unreadable[0]
    if current is None:
        found.append(Violation(layout.CONTROLLER, "no controller"))
        return None
    info, stat = current
    if not stat.ephemeral:
        found.append(
            Violation(layout.CONTROLLER, "is a persistent node; only a session may hold it")
        )
    if info.broker_id not in live:
        found.append(
            Violation(layout.CONTROLLER, f"names broker {info.broker_id}, which is not registered")
        )
    if stored_epoch is None:
        found.append(Violation(layout.CONTROLLER_EPOCH, "missing while a controller is registered"))
        return None
    epoch, epoch_stat = stored_epoch
    if stat.czxid != epoch_stat.mzxid:
        found.append(
            Violation(
                layout.CONTROLLER,
                f"was not created by the election that set {layout.CONTROLLER_EPOCH} to {epoch}",
            )
        )
    return None


def _registered_brokers(store: MetadataStore, found: list[Violation]) -> frozenset[int]:
    names = children(store, layout.BROKER_IDS)
    ids: list[int] = []
    paths: list[str] = []
    for name in names:
        broker = numeric_name(name)
        path = f"{layout.BROKER_IDS}/{name}"
        if broker is None:
            found.append(Violation(path, "not a broker id"))
            continue
        ids.append(broker)
        paths.append(path)
    live: set[int] = set()
    for broker, path, result in zip(ids, paths, _get_many(store, paths), strict=True):
        if isinstance(result, NoNodeError):
            continue  # gone since the listing
        if isinstance(result, StoreError):
            found.append(Violation(path, f"unreadable ({result.message})"))
            continue
        try:
            layout.BROKER.decode(result[0], path)
        except LayoutError as exc:
            found.append(Violation(path, f"unreadable ({exc.detail})"))
            continue
        if not result[1].ephemeral:
            found.append(Violation(path, "is a persistent node; a broker registers ephemerally"))
            continue
        live.add(broker)
    return frozenset(live)


def _assignments(
    store: MetadataStore, topics: Sequence[str], found: list[Violation]
) -> dict[str, dict[int, tuple[int, ...]]]:
    paths = [
        layout.topic_path(t) if _valid_topic(t) else f"{layout.BROKER_TOPICS}/{t}" for t in topics
    ]
    out: dict[str, dict[int, tuple[int, ...]]] = {}
    for topic, path, result in zip(topics, paths, _get_many(store, paths), strict=True):
        if isinstance(result, NoNodeError):
            continue
        if isinstance(result, StoreError):
            found.append(Violation(path, f"unreadable ({result.message})"))
            continue
        try:
            out[topic] = states.decode_assignment(path, result[0])
        except LayoutError as exc:
            found.append(Violation(path, f"unreadable ({exc.detail})"))
    return out


def _unclean_settings(
    store: MetadataStore, topics: Sequence[str], default: bool, found: list[Violation]
) -> dict[str, bool]:
    paths = [f"{layout.CONFIG_TOPICS}/{t}" for t in topics]
    out: dict[str, bool] = {}
    for topic, path, result in zip(topics, paths, _get_many(store, paths), strict=True):
        out[topic] = default
        if isinstance(result, StoreError):
            continue
        try:
            value = layout.TOPIC_CONFIG.decode(result[0], path).config.get(
                UNCLEAN_LEADER_ELECTION_ENABLE
            )
        except LayoutError as exc:
            found.append(Violation(path, f"unreadable ({exc.detail})"))
            continue
        if value is not None:
            out[topic] = value.strip().lower() == "true"
    return out


def _valid_topic(topic: str) -> bool:
    try:
        layout.topic_path(topic)
    except (ValueError, LayoutError):
        return False
    return True


def _get_many(store: MetadataStore, paths: Sequence[str]) -> list[tuple[bytes, Stat] | StoreError]:
    out: list[tuple[bytes, Stat] | StoreError] = []
    step = 20_000
    for start in range(0, len(paths), step):
        out.extend(store.get_many(paths[start : start + step]))
    return out
