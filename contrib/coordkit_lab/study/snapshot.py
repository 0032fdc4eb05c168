"""A cluster in Kafka's layout, read from its store into a study (``coordkit lab run --from-store``).

* topics and partition counts from ``/brokers/topics/T``;
* each partition's replica racks from its replicas (the assignment) and the brokers' ``rack`` in
  ``/brokers/ids/N``, each rack once, in replica order (none when no broker has a rack);
* legacy consumer groups from ``/consumers/G/ids/C``: every consumer *thread* is a member, named as
  Kafka's ``ConsumerThreadId`` (``C-0``, ``C-1``, ...): a consumer with ``{"orders": 2, "audit": 1}``
  is ``C-0`` (orders, audit) and ``C-1`` (orders), the units Kafka's legacy assignors share
  partitions over. Legacy consumers have no rack and no static id.

The store is opened read-only (:func:`coordkit.plugins.open_store` with ``read_only=True``): the
snapshot never writes, and a mistyped ZooKeeper chroot is an error, not a new node. The readers are
the admin commands' (:mod:`coordkit.cli.admin.cluster_state`) and the legacy consumer's
(:func:`coordkit.engine.legacy.registration.read_registrations`); a node that does not match
Kafka's schema is refused with its path. What cannot become part of a study is left out with a
note: a group whose consumers subscribe by pattern (``white_list``/``black_list``: their regular
expressions are not evaluated), subscriptions to topics the store does not have.
"""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from coordkit.cli.admin.cluster_state import assignments, registrations, topic_names
from coordkit.engine.legacy.registration import read_registrations, thread_ids_per_topic
from coordkit.errors import CoordkitError
from coordkit.kafka import layout
from coordkit.store import MetadataStore
from coordkit.store.tree import children
from coordkit.store.urls import redact
from coordkit.strategies.assignment import java_string_key
from coordkit_assignors.lab.study import listing
from coordkit_lab.study.file import StudyError

#: A study read from a store is called this unless a study file names it.
DEFAULT_NAME = "cluster"


def _notes(value: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(value)


@frozen
class StoreSnapshot:
    """What a store holds, as a study document (``name``, ``description``, ``topics``,
    ``groups``), and what was left out of it."""

    document: dict[str, Any]
    notes: tuple[str, ...] = field(default=(), converter=_notes)

    @property
    def groups(self) -> list[str]:
        return list(self.document.get("groups", {}))


def read_cluster(store: MetadataStore) -> StoreSnapshot:
    """The topics, replica racks and legacy consumer groups ``store`` holds (see the module)."""
    notes: list[str] = []
    brokers = registrations(store)
    racks = {b: r.info.rack for b, r in brokers.items() if r.info.rack is not None}
    found = assignments(store, topic_names(store))
    topics: dict[str, Any] = {}
    for name, assignment in found.items():
        numbers = sorted(assignment.partitions)  # 0..N-1: the topic codec refuses gaps
        if not racks:
            topics[name] = len(numbers)
            continue
        replica_racks = [
            list(dict.fromkeys(racks[b] for b in assignment.partitions[p] if b in racks))
            for p in numbers
        ]
        topics[name] = {"partitions": len(numbers), "replica_racks": replica_racks}
    groups: dict[str, Any] = {}
    for group in sorted(children(store, layout.CONSUMERS)):
        _, registered = read_registrations(store, group)
        if not registered:
            continue  # only offsets or owners left: nobody is in the group
        patterns = sorted({r.pattern for r in registered.values() if r.pattern != "static"})
        if patterns:
            notes.append(
                f"group {group!r} left out: its consumers subscribe by pattern "
                f"({', '.join(patterns)}); give its members in a study file"
            )
            continue
        members: dict[str, list[str]] = {}
        missing: set[str] = set()
        for consumer in sorted(registered, key=java_string_key):
            subscription = registered[consumer].subscription
            for topic, threads in thread_ids_per_topic(consumer, subscription).items():
                for thread in threads:
                    subscribed = members.setdefault(str(thread), [])
                    if topic in topics:
                        subscribed.append(topic)
                    else:
                        missing.add(topic)
        if missing:
            notes.append(
                f"group {group!r}: subscriptions to {listing(sorted(missing))} left out (no "
                f"such topic under {layout.BROKER_TOPICS})"
            )
        groups[group] = {
            "members": {
                thread: {"topics": members[thread]}
                for thread in sorted(members, key=java_string_key)
            }
        }
    document = {"name": DEFAULT_NAME, "topics": topics, "groups": groups}
    return StoreSnapshot(document, notes)


def snapshot_store(url: str) -> StoreSnapshot:
    """:func:`read_cluster` of the store at ``url``, opened read-only; every failure (the URL,
    the connection, a node) is one :class:`StudyError` naming the URL, credentials redacted."""
    from coordkit.plugins import open_store

    shown = redact(url)
    try:
        with open_store(url, read_only=True) as store:
            snapshot = read_cluster(store)
    except StudyError as exc:
        raise StudyError(f"--from-store {shown}: {exc}") from None
    except CoordkitError as exc:
        raise StudyError(f"--from-store {shown}: {exc}") from None
    snapshot.document["description"] = f"snapshot of {shown}"
    return snapshot
