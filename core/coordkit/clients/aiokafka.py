"""coordkit's assignors as aiokafka partition assignors.

aiokafka uses the entries of ``partition_assignment_strategy`` as given (it never instantiates
them), so :func:`assignor` returns an *instance*, and each consumer needs its own: call
:func:`assignor` once per consumer. A class with class-level state shared by every consumer of
the process is what broke aiokafka's own sticky assignor (aiokafka#1175)::

    import asyncio

    from aiokafka import AIOKafkaConsumer
    from coordkit.clients.aiokafka import assignor


    async def main() -> None:
        consumer = AIOKafkaConsumer(
            "orders",
            bootstrap_servers="localhost:9092",
            group_id="billing",
            partition_assignment_strategy=[assignor("sticky")],
        )
        await consumer.start()
        try:
            async for record in consumer:
                ...
        finally:
            await consumer.stop()


    asyncio.run(main())

aiokafka rebalances eagerly only, so assignors run eagerly (``cooperative-sticky`` runs as an
eager sticky assignor; an assignor that supports only cooperative rebalancing is refused).
aiokafka does not tell an assignor its generation, so a member uses the generation the group
leader stamps into each assignment (see :mod:`coordkit.clients.group`).
"""

from __future__ import annotations

import functools
import importlib
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
from coordkit.protocol.consumer import (
    encode_assignment,
    encode_generation,
    encode_subscription,
)

__all__ = ["assignor"]


def _abstract() -> Any:
    try:
        return importlib.import_module("aiokafka.coordinator.assignors.abstract")
    except ImportError:
        raise MissingDependencyError(
            "coordkit.clients.aiokafka needs aiokafka: pip install aiokafka"
        ) from None


@functools.cache
def _base() -> type[Any]:
    base: type[Any] = _abstract().AbstractPartitionAssignor

    class CoordkitAssignor(base):  # type: ignore[misc]
        """A coordkit assignor speaking aiokafka's assignor interface (one object per consumer)."""

        def __init__(self, name: str, loads: PartitionLoads | None = None) -> None:
            coordkit_assignor = lookup_assignor(name)
            protocol = choose_protocol(coordkit_assignor, "eager", cooperative_ok=False)
            self._name = name
            self.loads = loads
            self.state = ConsumerState(name, protocol)

        # aiokafka's abstract class declares ``name`` as an abstract property.
        @property
        def name(self) -> str:
            return self._name

        def metadata(self, topics: Iterable[str]) -> bytes:
            fields = self.state.subscription()
            return encode_subscription(topics, user_data=fields.user_data, version=0)

        def assign(self, cluster: Any, members: Mapping[str, Any]) -> dict[str, bytes]:
            # aiokafka decodes members' metadata as version 0: topics and user data only.
            joined = [
                JoinedMember(
                    member_id=member_id,
                    topics=tuple(metadata.subscription or ()),
                    user_data=user_data_bytes(metadata.user_data),
                )
                for member_id, metadata in members.items()
            ]
            topics = topic_partition_counts(cluster, (t for m in joined for t in m.topics))
            result = assign_group(
                lookup_assignor(self._name), topics, joined, cooperative=False, loads=self.loads
            )
            stamp = encode_generation(result.stamp)
            return {
                member: encode_assignment(parts, user_data=stamp)
                for member, parts in result.partitions.items()
            }

        def on_assignment(self, assignment: Any) -> None:
            partitions: dict[str, list[int]] = {}
            for tp in assignment.partitions():
                partitions.setdefault(tp.topic, []).append(tp.partition)
            self.state.on_assignment(partitions, None, user_data_bytes(assignment.user_data))

        def on_generation_assignment(self, generation: int) -> None:
            # Not called by aiokafka 0.14; a client that does call it knows better than the stamp.
            self.state.generation = generation

        def __repr__(self) -> str:
            return f"<coordkit aiokafka assignor {self.state!r}>"

    return CoordkitAssignor


def assignor(name: str, *, loads: PartitionLoads | None = None) -> Any:
    """A new aiokafka assignor object running coordkit's assignor ``name`` (one per consumer).

    :param name: a registered coordkit assignor; an unknown name raises
        :class:`~coordkit.errors.UnknownNameError` listing the registered ones.
    :param loads: ``loads(topic, partition_count)`` returning per-partition loads (or ``None``)
        for load-aware assignors such as ``weighted-sticky``; called on the group leader.
    """
    return _base()(name, loads)
