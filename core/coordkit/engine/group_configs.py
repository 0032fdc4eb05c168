"""Kafka 4's per-group configs (``GroupConfig``) as the engine reads them.

A group's overrides are ``/config/groups/<group>`` (:class:`~coordkit.engine.configs.
ConfigAdmin`, written by IncrementalAlterConfigs on a GROUP resource, checked there by Kafka's
rules). :class:`GroupConfigs` reads a group's node once and then follows it with a data watch, so
a coordinator asking at every heartbeat costs no store round trip, and a change applies to the
next heartbeat, as Kafka's ``GroupConfigManager`` applies it.

Kafka's group config names (the broker config each one overrides):

* ``consumer.session.timeout.ms`` (``group.consumer.session.timeout.ms``),
  ``consumer.heartbeat.interval.ms`` (``group.consumer.heartbeat.interval.ms``): honoured by the
  consumer-protocol coordinator (:mod:`coordkit.engine.groups.modern.heartbeat`);
* ``share.session.timeout.ms``, ``share.heartbeat.interval.ms``,
  ``share.record.lock.duration.ms``, ``share.delivery.count.limit``,
  ``share.partition.max.record.locks``, ``share.auto.offset.reset``, ``share.isolation.level``
  and the others of :data:`coordkit.serve.config_catalogue.GROUP_KEYS`: read with
  :meth:`GroupConfigs.value` / :meth:`GroupConfigs.int_value` by whoever honours them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from coordkit.engine.configs import GROUPS, ConfigAdmin
from coordkit.errors import LayoutError, StoreError
from coordkit.kafka import layout
from coordkit.store import MetadataStore, Watch
from coordkit.store.events import DataEvent

log = logging.getLogger("coordkit.engine.groups")

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"


class GroupConfigs:
    """The overrides of each group, from ``store``, kept up to date by watches."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._cache: dict[str, dict[str, str]] = {}
        self._watches: dict[str, Watch] = {}

    def overrides(self, group_id: str) -> Mapping[str, str]:
        """``group_id``'s overrides (``{}``: none, or a node that does not decode)."""
        with self._lock:
            cached = self._cache.get(group_id)
        if cached is not None:
            return cached
        path = ConfigAdmin.path(GROUPS, group_id)
        try:
            found = ConfigAdmin(self.store).read(GROUPS, group_id)
        except (LayoutError, StoreError) as exc:
            log.warning("group %r: its configs were not read (%s): the broker's apply", group_id,
                        exc)  # fmt: skip
            return {}
        with self._lock:
            self._cache.setdefault(group_id, found)
            if group_id not in self._watches:
                try:
                    self._watches[group_id] = self.store.watch_data(
                        path, lambda event: self._changed(group_id, event)
                    )
                except StoreError:
                    self._cache.pop(group_id, None)  # not followed: read again next time
            return self._cache.get(group_id, found)

    def _changed(self, group_id: str, event: DataEvent) -> None:
        config: dict[str, str] = {}
        if event.exists and event.data:
            try:
                config = dict(layout.TOPIC_CONFIG.decode(event.data, event.path).config)
            except LayoutError as exc:
                log.warning("group %r: its config node does not decode (%s)", group_id, exc)
        with self._lock:
            if group_id in self._watches:
                self._cache[group_id] = config

    def value(self, group_id: str, name: str) -> str | None:
        """The group's override of ``name`` (``None``: the broker's config applies)."""
        return self.overrides(group_id).get(name)

    def int_value(self, group_id: str, name: str) -> int | None:
        """The group's override of an INT config (``None``: none, or not a whole number)."""
        text = self.value(group_id, name)
        if text is None:
            return None
        try:
            return int(text.strip())
        except ValueError:
            return None

    def close(self) -> None:
        with self._lock:
            watches, self._watches = list(self._watches.values()), {}
            self._cache.clear()
        for watch in watches:
            watch.cancel()
