"""A legacy group as the store holds it: registrations, owner nodes and committed offsets.

What ``coordkit`` commands and the checks read: it comes from the store alone, so it shows the
group as every consumer would see it, not one consumer's belief.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from coordkit.engine.legacy.registration import read_registrations
from coordkit.errors import NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.model import ConsumerRegistration, TopicPartition
from coordkit.store import MetadataStore
from coordkit.store.paths import numeric_name


@attrs.frozen
class LegacyGroupView:
    """``/consumers/G`` read back.

    :param registrations: consumer id → its registration.
    :param owners: partition → the owning thread id (data of ``/consumers/G/owners/T/P``).
    :param offsets: partition → committed offset (``/consumers/G/offsets/T/P``).
    """

    group_id: str
    registrations: Mapping[str, ConsumerRegistration]
    owners: Mapping[TopicPartition, str]
    offsets: Mapping[TopicPartition, int]

    def owners_by_thread(self) -> dict[str, list[TopicPartition]]:
        out: dict[str, list[TopicPartition]] = {}
        for tp, thread in sorted(self.owners.items()):
            out.setdefault(thread, []).append(tp)
        return out


def _leaves(store: MetadataStore, root: str) -> dict[TopicPartition, bytes]:
    try:
        topics = store.children(root)
    except NoNodeError:
        return {}
    keys: list[TopicPartition] = []
    for topic in topics:
        try:
            keys.extend(
                TopicPartition(topic, partition)
                for p in store.children(f"{root}/{topic}")
                if (partition := numeric_name(p)) is not None
            )
        except NoNodeError:
            continue
    node_paths = [f"{root}/{tp.topic}/{tp.partition}" for tp in keys]
    out: dict[TopicPartition, bytes] = {}
    for tp, result in zip(keys, store.get_many(node_paths), strict=True):
        if isinstance(result, NoNodeError):
            continue
        if isinstance(result, StoreError):
            raise result
        out[tp] = result[0]
    return out


def read_group(store: MetadataStore, group_id: str) -> LegacyGroupView:
    """Read ``/consumers/G`` (registrations, owners, offsets) from ``store``."""
    _, registrations = read_registrations(store, group_id)
    group = layout.consumer_group_path(group_id)
    owners = {
        tp: layout.CONSUMER_OWNER.decode(
            data, layout.consumer_owner_path(group_id, tp.topic, tp.partition)
        ).thread_id
        for tp, data in _leaves(store, f"{group}/owners").items()
    }
    offsets = {
        tp: layout.CONSUMER_OFFSET.decode(
            data, layout.consumer_offset_path(group_id, tp.topic, tp.partition)
        ).offset
        for tp, data in _leaves(store, f"{group}/offsets").items()
    }
    return LegacyGroupView(group_id, registrations, owners, offsets)
