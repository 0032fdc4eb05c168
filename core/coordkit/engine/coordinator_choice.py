"""The group-coordinator strategy a cluster's brokers agreed on, in ``/coordkit/group_coordinator``.

Every broker maps a group id (and a transactional id) to a partition of its internal topic by
the cluster's group-coordinator strategy; the partition's leader coordinates it. Two brokers
with different strategies could both coordinate one group, or a transaction's offsets could be
kept where no coordinator looks. So the first broker to start writes its strategy's name, and a
broker whose strategy differs refuses to start (Kafka needs no such node: its formula is fixed).
"""

from __future__ import annotations

import json

from coordkit.engine.errors import EngineError
from coordkit.errors import NodeExistsError, NoNodeError
from coordkit.store import MetadataStore

GROUP_COORDINATOR_NODE = "/coordkit/group_coordinator"
_VERSION = 1


class GroupCoordinatorMismatchError(EngineError):
    """The cluster's brokers use another group-coordinator strategy than this one's."""


def read_group_coordinator(store: MetadataStore) -> str | None:
    """The strategy the cluster's brokers use; ``None`` when none has been written yet.

    :raises GroupCoordinatorMismatchError: the node holds something else than its JSON.
    """
    try:
        data, _ = store.get(GROUP_COORDINATOR_NODE)
    except NoNodeError:
        return None
    try:
        value = json.loads(data)
        name = value["strategy"]
        if value.get("version") != _VERSION or not isinstance(name, str) or not name:
            raise ValueError("not a version 1 node with a strategy name")
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as exc:
        raise GroupCoordinatorMismatchError(
            f"{GROUP_COORDINATOR_NODE}: unreadable ({exc}); expected "
            f'{{"version":1,"strategy":"<name>"}}'
        ) from None
    return name


def claim_group_coordinator(store: MetadataStore, name: str) -> None:
    """Record ``name`` as the cluster's group-coordinator strategy, or check it is the one
    recorded (the first writer wins a race).

    :raises GroupCoordinatorMismatchError: the cluster's brokers use another strategy.
    """
    found = read_group_coordinator(store)
    if found is None:
        data = json.dumps({"version": _VERSION, "strategy": name}, separators=(",", ":"))
        try:
            store.create(GROUP_COORDINATOR_NODE, data.encode(), make_parents=True)
            return
        except NodeExistsError:
            found = read_group_coordinator(store)
    if found != name:
        raise GroupCoordinatorMismatchError(
            f"group-coordinator strategy {name!r}: this cluster's brokers use {found!r} "
            f"({GROUP_COORDINATOR_NODE}); every broker of a cluster must place coordinators "
            "alike (to change it, stop every broker and delete that node: the coordinators of "
            "groups and transactions move)"
        )
