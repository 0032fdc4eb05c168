"""The share-partition state persisted through the metadata store (Kafka's ``Persister``).

Kafka keeps each share partition's state in the compacted topic ``__share_group_state``, written
by a share coordinator. coordkit keeps it in the metadata store, one node per share partition,
beside the group metadata it already keeps there (:mod:`coordkit.engine.groups.metadata`): every
coordkit process of a cluster reads the same store, so a new leader of a partition, in any
process, reads the state its old leader wrote, and a version-checked write fences a leader that
lost the partition without a coordinator of its own::

    /coordkit/share_group_state/<group id, percent-encoded>/<topic id>:<partition>

    {"version": 1, "startOffset": 120, "leaderEpoch": 3, "stateEpoch": 0,
     "stateBatches": [{"firstOffset": 120, "lastOffset": 124, "deliveryState": 0,
                       "deliveryCount": 1},
                      {"firstOffset": 125, "lastOffset": 125, "deliveryState": 4,
                       "deliveryCount": 2}]}

The field names are Kafka's (``ShareSnapshotValue``); ``deliveryState`` is Kafka's
``RecordState`` id (0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED). Keyed by topic id, as Kafka's: a
topic deleted and created again under its name starts with no state.

A node is read whole and validated before use: a value that is not such a document is a
:class:`~coordkit.errors.LayoutError` naming the node and the field.
"""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote, unquote

from coordkit.errors import BadVersionError, LayoutError, NodeExistsError, NoNodeError
from coordkit.serve.dataplane.share.in_flight import RecordState
from coordkit.serve.dataplane.share.share_state import ShareState, StateBatch
from coordkit.store.interface import MetadataStore
from coordkit.support import jsontext

SHARE_STATE_ROOT = "/coordkit/share_group_state"
STATE_VERSION = 1
#: Kafka's int32 and int64 bounds for the epochs and offsets.
_INT32 = 2**31
_INT64 = 2**63


class StaleStateError(Exception):
    """Another leader wrote the share partition's state since this one read it (Kafka's
    FENCED_STATE_EPOCH): this leader must read it again before it may write."""


def group_path(group_id: str) -> str:
    """The node of ``group_id``'s share-partition states (any group id: percent-encoded)."""
    name = quote(group_id, safe="")
    if name in ("", ".", ".."):
        name = name.replace(".", "%2E") or "%00empty"
    return f"{SHARE_STATE_ROOT}/{name}"


def group_of(name: str) -> str:
    """The group id of a child name of :data:`SHARE_STATE_ROOT`."""
    return "" if name == "%00empty" else unquote(name)


def state_path(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{group_path(group_id)}/{topic_id}:{partition}"


def encode_state(state: ShareState) -> bytes:
    batches = [
        {"firstOffset": b.first_offset, "lastOffset": b.last_offset,
         "deliveryState": int(b.delivery_state), "deliveryCount": b.delivery_count}
        for b in state.batches
    ]  # fmt: skip
    value = {"version": STATE_VERSION, "startOffset": state.start_offset,
             "leaderEpoch": state.leader_epoch, "stateEpoch": state.state_epoch,
             "stateBatches": batches}  # fmt: skip
    return json.dumps(value, separators=(",", ":")).encode()


def _int(path: str, obj: dict[str, Any], name: str, low: int, high: int) -> int:
    value = obj.get(name)
    if type(value) is not int:
        raise LayoutError(path, f"expected an integer, got {jsontext.kind_of(value)}", field=name)
    if not low <= value < high:
        raise LayoutError(path, f"{value} is out of range [{low}, {high})", field=name)
    return value


def decode_state(path: str, data: bytes) -> ShareState:
    """The state in node ``path``'s value ``data``; :class:`LayoutError` when it is not one."""
    try:
        obj = jsontext.loads(data)
    except jsontext.JSONTextError as exc:
        raise LayoutError(path, str(exc)) from None
    if not isinstance(obj, dict):
        raise LayoutError(path, f"expected a JSON object, got {jsontext.kind_of(obj)}")
    if obj.get("version") != STATE_VERSION:
        raise LayoutError(path, f"unknown version {obj.get('version')!r}", field="version")
    raw = obj.get("stateBatches")
    if not isinstance(raw, list):
        raise LayoutError(path, f"expected a list, got {jsontext.kind_of(raw)}",
                          field="stateBatches")  # fmt: skip
    kept = {int(s) for s in RecordState} - {RecordState.ACQUIRED, RecordState.ARCHIVING}
    batches = []
    for item in raw:
        if not isinstance(item, dict):
            raise LayoutError(path, "a state batch is not an object", field="stateBatches")
        first = _int(path, item, "firstOffset", 0, _INT64)
        last = _int(path, item, "lastOffset", first, _INT64)
        state = _int(path, item, "deliveryState", 0, 5)
        if state not in kept:
            raise LayoutError(path, f"delivery state {state} is never persisted",
                              field="deliveryState")  # fmt: skip
        count = _int(path, item, "deliveryCount", 0, 2**15)
        batches.append(StateBatch(first, last, RecordState(state), count))
    try:
        return ShareState(
            _int(path, obj, "startOffset", 0, _INT64),
            _int(path, obj, "leaderEpoch", -1, _INT32),
            _int(path, obj, "stateEpoch", 0, _INT32),
            tuple(batches),
        )
    except ValueError as exc:
        raise LayoutError(path, str(exc), field="stateBatches") from None


class StorePersister:
    """Reads and writes share-partition states in ``store`` (blocking calls: run them off the
    event loop)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int
    ) -> tuple[ShareState, int] | None:
        """The state and its node version, or ``None`` when none was written."""
        path = state_path(group_id, topic_id, partition)
        try:
            data, stat = self.store.get(path)
        except NoNodeError:
            return None
        return decode_state(path, data), stat.version

    def version(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int | None:
        """The version of the state's node (``None``: no state)."""
        stat = self.store.exists(state_path(group_id, topic_id, partition))
        return None if stat is None else stat.version

    def write(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state: ShareState,
        version: int | None,
    ) -> int:
        """Write ``state`` over the version read (``None``: none was there); its new version.

        :raises StaleStateError: another leader wrote (or deleted) it meanwhile.
        """
        path = state_path(group_id, topic_id, partition)
        data = encode_state(state)
        try:
            if version is None:
                self.store.create(path, data, make_parents=True)
                return 0
            return self.store.set(path, data, version=version).version
        except (BadVersionError, NodeExistsError, NoNodeError):
            raise StaleStateError(path) from None

    def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> bool:
        """Delete one partition's state; whether there was one."""
        try:
            self.store.delete(state_path(group_id, topic_id, partition))
        except NoNodeError:
            return False
        return True

    def delete_group(self, group_id: str) -> None:
        """Delete every state of ``group_id`` (the group was deleted)."""
        try:
            self.store.delete(group_path(group_id), recursive=True)
        except NoNodeError:
            pass

    def partitions(self, group_id: str) -> list[tuple[uuid.UUID, int]]:
        """The share partitions ``group_id`` has a state for (names not of this layout are
        skipped)."""
        try:
            names = self.store.children(group_path(group_id))
        except NoNodeError:
            return []
        found = []
        for name in names:
            topic, _, number = name.rpartition(":")
            try:
                found.append((uuid.UUID(topic), int(number)))
            except ValueError:
                continue
        return sorted(found, key=lambda tp: (str(tp[0]), tp[1]))
