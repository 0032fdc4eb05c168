"""Digest authentication, the ACL on nodes the store creates, and keeping credentials out of logs.

With ``user:pass@`` in the URL the client authenticates with ZooKeeper's ``digest`` scheme and every
node it creates (the chroot included) carries the ACL *that user may do everything, anyone may
read*: other credentials can read the tree but cannot change it. Without credentials nodes are
open to everyone (``world:anyone`` with all permissions), as ZooKeeper's default.
"""

from __future__ import annotations

import logging
import re
from collections.abc import MutableMapping
from typing import Any

from coordkit_zookeeper.config import ZooKeeperConfig

REDACTED = "***"
#: kazoo also logs the session password (hex and raw bytes) when it connects; whoever has it can
#: take the session over.
_SESSION_PASSWORD = re.compile(r"(session_passwd: |passwd=)b(['\"]).*?(?<!\\)\2")


def auth_data(config: ZooKeeperConfig) -> list[tuple[str, str]]:
    """kazoo's ``auth_data``: the digest credential, sent again after every reconnect."""
    credential = config.digest_credential
    return [("digest", credential)] if credential else []


def node_acl(config: ZooKeeperConfig) -> list[Any]:
    """The ACL for nodes this store creates."""
    from kazoo.security import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, make_digest_acl

    if config.username is None or config.password is None:
        return list(OPEN_ACL_UNSAFE)
    return [make_digest_acl(config.username, config.password, all=True), *READ_ACL_UNSAFE]


class RedactingLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """The logger handed to kazoo: kazoo logs every request at DEBUG, the digest ``Auth`` packet
    (``user:password``) and the session password included, so each message is formatted here and
    its secrets replaced."""

    def __init__(self, logger: logging.Logger, secrets: tuple[str, ...]):
        super().__init__(logger, {})
        # Longest first, so "user:password" is replaced before "password" alone.
        self._secrets = tuple(sorted((s for s in secrets if s), key=len, reverse=True))

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        return self.redact(str(msg)), kwargs

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        if not self.isEnabledFor(level):
            return
        if args:
            try:
                msg = str(msg) % args
            except (TypeError, ValueError):
                msg = " ".join([str(msg), *map(str, args)])
        text, options = self.process(msg, kwargs)
        self.logger.log(level, text, **options)

    def redact(self, text: str) -> str:
        if "passwd" in text:
            text = _SESSION_PASSWORD.sub(rf"\1{REDACTED}", text)
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def warn(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        # kazoo still calls the deprecated ``warn``.
        self.log(logging.WARNING, msg, *args, **kwargs)
