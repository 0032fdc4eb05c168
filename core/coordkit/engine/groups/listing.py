"""DescribeGroups and ListGroups on a broker's group coordinator: the classic groups as Kafka's
coordinator summarises them, and every hosted group (classic or consumer protocol) listed."""

from __future__ import annotations

from collections.abc import Callable

from coordkit.engine.groups import metadata
from coordkit.engine.groups.hosting import HostedGroup, PartitionHosting
from coordkit.engine.groups.modern.group import CONSUMER_GROUP_TYPE, ConsumerGroup
from coordkit.engine.groups.protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ErrorCode,
    GroupDescription,
    GroupListing,
    GroupState,
    MemberDescription,
)
from coordkit.engine.share_groups.group import SHARE_GROUP_TYPE, SHARE_PROTOCOL_TYPE, ShareGroup
from coordkit.errors import NoNodeError
from coordkit.store import MetadataStore

#: ``(group id, create?)`` -> the hosted group, ``None`` (no such group) or why not served here.
Lookup = Callable[..., HostedGroup | ErrorCode | None]


class GroupListings:
    def __init__(
        self,
        broker_id: int,
        store: MetadataStore,
        hosting: PartitionHosting,
        lookup: Lookup,
        closed: Callable[[], bool],
    ):
        self.broker_id = broker_id
        self.store = store
        self.hosting = hosting
        self._lookup = lookup
        self._closed = closed

    # -- DescribeGroups ------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription:
        found = self._lookup(group_id, create=False)
        if isinstance(found, ErrorCode):
            return GroupDescription(group_id, GroupState.DEAD, error=found)
        if found is None:
            return GroupDescription(group_id, GroupState.DEAD, coordinator=self.broker_id)
        if isinstance(found, ConsumerGroup | ShareGroup):
            # Kafka describes only classic groups here (ConsumerGroupDescribe, ShareGroupDescribe
            # the others).
            return GroupDescription(
                group_id, GroupState.DEAD, error=ErrorCode.GROUP_ID_NOT_FOUND,
                coordinator=self.broker_id,
            )  # fmt: skip
        group = found
        with group.lock:
            return GroupDescription(
                group_id=group_id,
                state=group.state,
                generation=group.generation,
                protocol_type=group.protocol_type,
                protocol=group.protocol,
                leader=group.leader,
                coordinator=None if group.is_(GroupState.DEAD) else self.broker_id,
                members=tuple(
                    MemberDescription(
                        m.member_id,
                        m.group_instance_id,
                        m.client_id,
                        m.subscription.topics,
                        m.assignment,
                        m.client_host,
                        m.metadata.get(group.protocol or ""),
                        m.raw_assignment,
                    )
                    for m in group.by_join_order()
                ),
            )

    # -- ListGroups ----------------------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """The groups of the offsets partitions this broker hosts: loaded ones, and persisted ones
        of those partitions (loaded now, as Kafka loads a partition's groups when it takes the
        partition over). Raises :class:`StoreError` when the store cannot list them."""
        if self._closed():
            return []
        try:
            names = set(self.store.children(metadata.GROUPS_ROOT))
        except NoNodeError:
            names = set()
        hosted = set(self.hosting.partitions())
        names.update(g.group_id for g in self.hosting.groups())
        listed: list[GroupListing] = []
        for group_id in sorted(names):
            try:
                metadata.group_path(group_id)
            except ValueError:
                continue
            if self.hosting.partition_for(group_id) not in hosted:
                continue
            found = self._lookup(group_id, create=False)
            if found is None or isinstance(found, ErrorCode):
                continue
            if isinstance(found, ShareGroup):
                with found.lock:
                    if not found.dead:
                        listed.append(GroupListing(group_id, SHARE_PROTOCOL_TYPE,
                                                   found.state.value, SHARE_GROUP_TYPE))  # fmt: skip
                continue
            if isinstance(found, ConsumerGroup):
                with found.lock:
                    if not found.dead:
                        listed.append(GroupListing(group_id, CONSUMER_PROTOCOL_TYPE,
                                                   found.state.value, CONSUMER_GROUP_TYPE))  # fmt: skip
                continue
            with found.lock:
                if not found.is_(GroupState.DEAD):
                    listed.append(GroupListing(group_id, found.protocol_type, found.state))
        return listed
