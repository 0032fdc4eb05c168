"""coordkit's assignors as kafka-python partition assignors (kafka-python 3.0 or newer).

Pass the class :func:`assignor` returns as ``partition_assignment_strategy``; kafka-python makes
one instance per consumer, so each consumer keeps its own owned partitions and generation::

    from kafka import KafkaConsumer
    from coordkit.clients.kafka_python import assignor

    consumer = KafkaConsumer(
        "orders",
        bootstrap_servers="localhost:9092",
        group_id="billing",
        partition_assignment_strategy=[assignor("sticky")],
    )
    for record in consumer:
        ...

The class's ``name`` is the assignor's coordkit name, which is the protocol name the group
coordinator matches: every member of a group must offer it. ``sticky`` and ``cooperative-sticky``
write the user data of Kafka's assignors of those names, so they can share a group with Java
consumers using Kafka's; ``uniform`` and ``weighted-sticky`` exist only in coordkit.

An assignor that supports cooperative rebalancing (``cooperative-sticky``) runs it by default:
kafka-python then keeps partitions across rebalances and moves them over two rounds. Pass
``protocol="eager"`` to run it eagerly. kafka-python refuses to mix eager and cooperative
assignors in one consumer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from coordkit.clients.group import (
    ConsumerState,
    JoinedMember,
    PartitionLoads,
    assign_group,
    choose_protocol,
    lookup_assignor,
    topic_partition_counts,
    user_data_bytes,
)
from coordkit.errors import MissingDependencyError
from coordkit.protocol.consumer import encode_generation

__all__ = ["assignor"]


def _kafka() -> Any:
    try:
        from kafka.coordinator.assignors import abstract
        from kafka.protocol.consumer import metadata
    except ImportError:
        raise MissingDependencyError(
            "coordkit.clients.kafka_python needs kafka-python 3.0 or newer: "
            "pip install 'kafka-python>=3.0'"
        ) from None
    return abstract, metadata


def _partitions(items: Iterable[Any] | None) -> dict[str, tuple[int, ...]]:
    out: dict[str, list[int]] = {}
    for item in items or ():
        out.setdefault(item.topic, []).extend(item.partitions)
    return {t: tuple(ps) for t, ps in out.items()}


def _joined(member: Any) -> JoinedMember:
    """A JoinGroup response member, its metadata already decoded by kafka-python."""
    sub = member.metadata
    version = getattr(sub, "version", 0) or 0
    return JoinedMember(
        member_id=member.member_id,
        topics=tuple(sub.topics or ()),
        instance_id=getattr(member, "group_instance_id", None),
        user_data=user_data_bytes(sub.user_data),
        owned=_partitions(sub.owned_partitions) if version >= 1 else {},
        generation=sub.generation_id if version >= 2 else None,
        rack=sub.rack_id if version >= 3 else None,
    )


@functools.cache
def _base() -> type[Any]:
    abstract, metadata = _kafka()
    ConsumerProtocolSubscription = metadata.ConsumerProtocolSubscription
    ConsumerProtocolAssignment = metadata.ConsumerProtocolAssignment
    RebalanceProtocol = abstract.RebalanceProtocol

    base: type[Any] = abstract.AbstractPartitionAssignor

    class CoordkitAssignor(base):  # type: ignore[misc]
        """A coordkit assignor speaking kafka-python's assignor interface."""

        name: str = ""
        #: The registered coordkit assignor and the rebalance protocol it runs.
        coordkit_name: str = ""
        protocol: str = "eager"
        loads: PartitionLoads | None = None

        def __init__(self) -> None:
            self.state = ConsumerState(self.coordkit_name, self.protocol)

        def supported_protocols(self) -> list[Any]:
            if self.protocol == "cooperative":
                return [RebalanceProtocol.COOPERATIVE]
            return [RebalanceProtocol.EAGER]

        def metadata(self, topics: Iterable[str]) -> Any:
            fields = self.state.subscription()
            TopicPartition = ConsumerProtocolSubscription.TopicPartition
            return ConsumerProtocolSubscription(
                version=fields.version,
                topics=sorted(topics),
                user_data=fields.user_data,
                owned_partitions=[
                    TopicPartition(topic=t, partitions=list(ps))
                    for t, ps in sorted(fields.owned.items())
                ],
                generation_id=fields.generation,
            )

        def assign(self, cluster: Any, members: Iterable[Any]) -> dict[str, Any]:
            joined = [_joined(m) for m in members]
            topics = topic_partition_counts(cluster, (t for m in joined for t in m.topics))
            result = assign_group(
                lookup_assignor(self.coordkit_name),
                topics,
                joined,
                cooperative=self.state.cooperative,
                loads=type(self).loads,
            )
            stamp = encode_generation(result.stamp)
            return {
                member: ConsumerProtocolAssignment(
                    version=0,
                    assigned_partitions=[(t, list(ps)) for t, ps in sorted(parts.items())],
                    user_data=stamp,
                )
                for member, parts in result.partitions.items()
            }

        def on_assignment(self, assignment: Any, generation: int | None = None) -> None:
            self.state.on_assignment(
                _partitions_of(assignment.partitions()),
                generation,
                user_data_bytes(assignment.user_data),
            )

        def on_generation_assignment(self, generation: int) -> None:
            self.state.generation = generation

        def __repr__(self) -> str:
            return f"<{type(self).__name__} {self.state!r}>"

    return CoordkitAssignor


def _partitions_of(tps: Iterable[Any]) -> Mapping[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def _class_name(name: str) -> str:
    words = [w for w in re.split(r"[^0-9A-Za-z]+", name) if w]
    return "Coordkit" + "".join(w[:1].upper() + w[1:] for w in words) + "Assignor"


def assignor(
    name: str, *, protocol: str | None = None, loads: PartitionLoads | None = None
) -> type[Any]:
    """A kafka-python assignor class running coordkit's assignor ``name``.

    :param name: a registered coordkit assignor (``coordkit plugins`` lists them); an unknown
        name raises :class:`~coordkit.errors.UnknownNameError` listing the registered ones.
    :param protocol: ``"eager"`` or ``"cooperative"``; default: cooperative if the assignor
        supports it, else eager.
    :param loads: ``loads(topic, partition_count)`` returning per-partition loads (or ``None``)
        for load-aware assignors such as ``weighted-sticky``; called on the group leader.
    """
    coordkit_assignor = lookup_assignor(name)
    chosen = choose_protocol(coordkit_assignor, protocol, cooperative_ok=True)
    namespace = {
        "name": name,
        "coordkit_name": name,
        "protocol": chosen,
        "loads": staticmethod(loads) if loads is not None else None,
        "__module__": __name__,
        "__doc__": f"coordkit's {name!r} assignor ({chosen} rebalancing) for kafka-python.",
    }
    cls: type[Any] = type(_class_name(name), (_base(),), namespace)
    return cls
