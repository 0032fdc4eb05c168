"""``kafka``: Kafka 3.9's ``AclAuthorizer`` — its rules (:mod:`.rules`) over every ACL of the
store held in memory, kept current as Kafka's brokers keep theirs: the change notifications under
``/kafka-acl-changes`` and ``/kafka-acl-extended-changes`` name the resources to read again, so an
ACL written by ``coordkit acls``, CreateAcls on any coordkit broker or a Kafka 3.9 broker on the
same ZooKeeper takes effect without a restart.

Configs (Kafka's names): ``super.users`` (``User:a;User:b``) and
``allow.everyone.if.no.acl.found`` (``false``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence

import attrs

from coordkit.engine.acls import AclAdmin
from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.kafka import acls as layout
from coordkit.kafka.acls import AccessControlEntry, ResourcePattern
from coordkit.store import MetadataStore
from coordkit.store.events import Watch
from coordkit.strategies.authorization import Action, AuthorizerConfigError
from coordkit_authorizers.rules import decide

log = logging.getLogger("coordkit.authorizer")

SUPER_USERS = "super.users"
ALLOW_IF_NO_ACL = "allow.everyone.if.no.acl.found"


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (Kafka's ``AclAuthorizer.configure``)."""
    users = set()
    for part in text.split(";"):
        word = part.strip()
        if not word:
            continue
        kind, sep, _ = word.partition(":")
        if not sep or not kind:
            raise AuthorizerConfigError(
                f"{SUPER_USERS}: {word!r} is not a principal 'Type:name' (e.g. User:admin)"
            )
        users.add(word)
    return frozenset(users)


def _change_number(name: str) -> int | None:
    digits = name.removeprefix(layout.CHANGE_PREFIX)
    return int(digits) if digits != name and digits.isdigit() else None


class AclCache:
    """Every resource's ACLs on ``store``, following the change notifications."""

    def __init__(self, store: MetadataStore) -> None:
        self.admin = AclAdmin(store)
        self.store = store
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._last: dict[str, int] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watches: list[Watch] = []

    def start(self) -> None:
        for path in (layout.LITERAL_CHANGES, layout.EXTENDED_CHANGES):
            self.store.ensure_path(path)
            # What is there now is read below: only later notifications need following.
            numbers = [n for n in map(_change_number, self.store.children(path)) if n is not None]
            self._last[path] = max(numbers, default=-1)
        self.acls = self.admin.read_all()
        self._thread = threading.Thread(target=self._run, name="coordkit-acls", daemon=True)
        self._thread.start()
        for path in self._last:
            self._watches.append(self.store.watch_children(path, lambda _e: self._wake.set()))
        self._wake.set()  # a notification written before the watches were set is not missed

    def close(self) -> None:
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.process_notifications()
            except StoreError as exc:
                log.warning("ACL change notifications not read: %s", exc)
                self._stop.wait(1.0)
                self._wake.set()
            except Exception:
                log.exception("ACL change notifications not processed")

    def process_notifications(self) -> list[ResourcePattern]:
        """Read each resource the notifications after the last one processed name again
        (Kafka's ``AclChangedNotificationHandler``); the resources read."""
        read: list[ResourcePattern] = []
        for path, last in list(self._last.items()):
            try:
                names = self.store.children(path)
            except NoNodeError:
                continue
            fresh = sorted((n, name) for name in names
                           if (n := _change_number(name)) is not None and n > last)  # fmt: skip
            for number, name in fresh:
                self._last[path] = number
                try:
                    data, _ = self.store.get(f"{path}/{name}")
                    pattern = layout.decode_change(f"{path}/{name}", data)
                except NoNodeError:
                    continue
                except LayoutError as exc:
                    log.warning("ACL change notification passed over: %s", exc)
                    continue
                if pattern not in read:
                    read.append(pattern)
        for pattern in read:
            entries, _ = self.admin.read(pattern)
            if entries:
                self.acls[pattern] = entries
            else:
                self.acls.pop(pattern, None)
            log.info("ACLs of %s read again (%d entries)", pattern, len(entries))
        return read


class AclAuthorizer:
    """Kafka's rules over the ACLs of one store (see the module docstring)."""

    def __init__(self, store: MetadataStore, configs: Mapping[str, str]) -> None:
        self.super_users = parse_super_users(configs.get(SUPER_USERS, ""))
        allow = configs.get(ALLOW_IF_NO_ACL, "false").strip().lower()
        if allow not in ("true", "false"):
            raise AuthorizerConfigError(f"{ALLOW_IF_NO_ACL}: {allow!r} is not true or false")
        self.allow_if_no_acl = allow == "true"
        self.cache = AclCache(store)

    def authorize(self, principal: str, host: str, actions: Sequence[Action]) -> list[bool]:
        acls = self.cache.acls
        return [decide(acls, principal, host, action, super_users=self.super_users,
                       allow_if_no_acl=self.allow_if_no_acl) for action in actions]  # fmt: skip

    def start(self) -> None:
        self.cache.start()

    def close(self) -> None:
        self.cache.close()


@attrs.frozen
class KafkaAuthorizerFactory:
    name: str = "kafka"
    description: str = (
        "Kafka's AclAuthorizer: ACLs in Kafka's ZooKeeper layout, deny wins, super.users, "
        "allow.everyone.if.no.acl.found"
    )

    def __call__(self, store: MetadataStore, configs: Mapping[str, str]) -> AclAuthorizer:
        return AclAuthorizer(store, configs)


KAFKA = KafkaAuthorizerFactory()

__all__ = ["KAFKA", "AclAuthorizer", "AclCache"]
