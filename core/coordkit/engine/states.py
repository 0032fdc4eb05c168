"""Partition leadership as the controller keeps it, and a fast codec for the state znode.

The controller reads and writes up to hundreds of thousands of
``/brokers/topics/T/partitions/P/state`` nodes on failover, so it keeps them as slotted records
instead of validated :class:`~coordkit.kafka.model.PartitionState` objects, and encodes them to the very
bytes :data:`coordkit.kafka.layout.PARTITION_STATE` writes (same field order, compact JSON). Values read
back that do not parse fall back to the layout codec, whose error names the path and the field.
"""

from __future__ import annotations

import re
from typing import Any

from coordkit.kafka import layout
from coordkit.kafka.model import NO_LEADER, PartitionState
from coordkit.store.paths import numeric_name
from coordkit.support import jsontext

#: Key of a partition inside the engine: ``(topic, partition)`` (hashes fast at 100,000s).
TP = tuple[str, int]

STATE_VERSION = 1


class LeaderIsr:
    """A partition state plus the version of the node it was read from or written to."""

    __slots__ = ("controller_epoch", "isr", "leader", "leader_epoch", "zk_version")

    def __init__(
        self,
        leader: int,
        leader_epoch: int,
        isr: tuple[int, ...],
        controller_epoch: int,
        zk_version: int = -1,
    ):
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.isr = isr
        self.controller_epoch = controller_epoch
        self.zk_version = zk_version

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def to_model(self) -> PartitionState:
        fields: dict[str, Any] = {
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": self.isr,
            "controller_epoch": self.controller_epoch,
        }
        return PartitionState(**fields)

    def same_leadership(self, other: LeaderIsr) -> bool:
        return (
            self.leader == other.leader
            and self.leader_epoch == other.leader_epoch
            and self.isr == other.isr
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LeaderIsr):
            return NotImplemented
        return self.same_leadership(other) and self.controller_epoch == other.controller_epoch

    def __hash__(self) -> int:
        return hash((self.leader, self.leader_epoch, self.isr, self.controller_epoch))

    def __repr__(self) -> str:
        return (
            f"LeaderIsr(leader={self.leader}, leader_epoch={self.leader_epoch}, "
            f"isr={list(self.isr)}, controller_epoch={self.controller_epoch}, "
            f"zk_version={self.zk_version})"
        )


def encode_state(
    leader: int, leader_epoch: int, isr: tuple[int, ...], controller_epoch: int
) -> bytes:
    """Exactly ``layout.PARTITION_STATE.encode(...)``, without building a validated object."""
    isr_text = ",".join(map(str, isr))
    return (
        f'{{"controller_epoch":{controller_epoch},"leader":{leader},"version":{STATE_VERSION},'
        f'"leader_epoch":{leader_epoch},"isr":[{isr_text}]}}'
    ).encode()


class StateEncoder:
    """:func:`encode_state` for many states of one controller epoch: the text around the leader
    epoch is built once per distinct (leader, ISR) and kept (a controlled shutdown encodes
    1,333,334 states of a few distinct ones; the cache is bounded all the same)."""

    __slots__ = ("_controller_epoch", "_limit", "_templates")

    def __init__(self, controller_epoch: int, *, limit: int = 65536):
        self._controller_epoch = controller_epoch
        self._limit = limit  # distinct (leader, ISR) pairs kept before the cache starts over
        self._templates: dict[tuple[int, tuple[int, ...]], tuple[bytes, bytes]] = {}

    def __call__(self, leader: int, leader_epoch: int, isr: tuple[int, ...]) -> bytes:
        template = self._templates.get((leader, isr))
        if template is None:
            if len(self._templates) >= self._limit:
                self._templates.clear()
            head = (
                f'{{"controller_epoch":{self._controller_epoch},"leader":{leader},'
                f'"version":{STATE_VERSION},"leader_epoch":'
            ).encode()
            tail = f',"isr":[{",".join(map(str, isr))}]}}'.encode()
            template = self._templates[(leader, isr)] = (head, tail)
        return b"%b%d%b" % (template[0], leader_epoch, template[1])


def encode(state: LeaderIsr) -> bytes:
    return encode_state(state.leader, state.leader_epoch, state.isr, state.controller_epoch)


#: The exact shape Kafka (and this engine) writes; anything else takes the JSON path.
_CANONICAL = re.compile(
    rb'\{"controller_epoch":(\d+),"leader":(-?\d+),"version":1,"leader_epoch":(\d+),'
    rb'"isr":\[((?:\d+(?:,\d+)*)?)\]\}'
)


def decode_state(path: str, data: bytes, zk_version: int) -> LeaderIsr:
    """Decode a state node; malformed values raise :class:`~coordkit.errors.LayoutError`."""
    match = _CANONICAL.fullmatch(data)
    if match is not None:
        controller_epoch, leader, leader_epoch, isr = match.groups()
        return LeaderIsr(
            int(leader),
            int(leader_epoch),
            tuple(map(int, isr.split(b","))) if isr else (),
            int(controller_epoch),
            zk_version,
        )
    try:
        obj: Any = jsontext.loads(data)
        leader = obj["leader"]
        leader_epoch = obj["leader_epoch"]
        isr = tuple(obj["isr"])
        controller_epoch = obj["controller_epoch"]
        if (
            type(leader) is int
            and type(leader_epoch) is int
            and type(controller_epoch) is int
            and all(type(r) is int for r in isr)
        ):
            return LeaderIsr(leader, leader_epoch, isr, controller_epoch, zk_version)
    except (ValueError, TypeError, KeyError):
        pass
    # Slow path: the layout codec explains exactly what is wrong.
    model = layout.PARTITION_STATE.decode(data, path)
    return LeaderIsr(
        model.leader, model.leader_epoch, model.isr, model.controller_epoch, zk_version
    )


def decode_assignment(path: str, data: bytes) -> dict[int, tuple[int, ...]]:
    """Replica lists of a ``/brokers/topics/T`` node (partition → replicas), checked as the layout
    codec checks them; anything unusual is left to the codec, whose errors name path and field."""
    try:
        obj: Any = jsontext.loads(data)
        raw = obj["partitions"]
        if type(obj.get("version")) is int and type(raw) is dict:
            out = {
                int(p): tuple(r)
                for p, r in raw.items()
                if p.isascii() and p.isdigit() and type(r) is list
            }
            if (
                len(out) == len(raw)
                and sorted(out) == list(range(len(out)))
                and all(
                    r and len(set(r)) == len(r) and all(type(b) is int and b >= 0 for b in r)
                    for r in out.values()
                )
            ):
                return out
    except (ValueError, TypeError, KeyError, AttributeError):
        pass
    return {p: tuple(r) for p, r in layout.TOPIC.decode(data, path).partitions.items()}


def lacks_topic_id(data: bytes) -> bool:
    """Whether a ``/brokers/topics/T`` node may have no topic id (written by a tool older than
    Kafka 2.8): a cheap filter, true for every node without one; the controller decodes the
    candidates fully before it gives one (:mod:`coordkit.engine.controller.topic_ids`)."""
    if b'"topic_id"' not in data:
        return True
    try:
        found = jsontext.loads(data).get("topic_id")
    except (ValueError, TypeError, AttributeError):
        return False  # unreadable: the assignment's decoder says why
    return not isinstance(found, str) or not found


def state_path(tp: TP) -> str:
    return f"{layout.BROKER_TOPICS}/{tp[0]}/partitions/{tp[1]}/state"


def partition_path(tp: TP) -> str:
    return f"{layout.BROKER_TOPICS}/{tp[0]}/partitions/{tp[1]}"


def partitions_path(topic: str) -> str:
    return f"{layout.BROKER_TOPICS}/{topic}/partitions"


def parse_state_path(path: str) -> TP | None:
    """``(topic, partition)`` of a state node path, or ``None`` for any other path."""
    parts = path.split("/")
    # ['', 'brokers', 'topics', T, 'partitions', P, 'state']
    if (
        len(parts) == 7
        and parts[1] == "brokers"
        and parts[2] == "topics"
        and parts[4] == "partitions"
        and parts[6] == "state"
        and (partition := numeric_name(parts[5])) is not None
    ):
        return parts[3], partition
    return None
