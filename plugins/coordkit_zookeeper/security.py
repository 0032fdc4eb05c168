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
from urllib.parse import quote, quote_plus

from coordkit_zookeeper.config import ZooKeeperConfig

REDACTED = "***"
#: kazoo also logs the session password (hex and raw bytes) when it connects; whoever has it can
#: take the session over.
_HEX_ESCAPE = re.compile(r"%[0-9A-F]{2}")
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
    """The logger handed to kazoo.

    * Secrets: kazoo logs every request at DEBUG, the digest ``Auth`` packet (``user:password``)
      and the session password included, so each message is formatted here and its secrets
      replaced — in every form a log line may carry them: as they are, escaped as in a ``repr``
      (``\\`` for a backslash, ``\\t`` for a tab; once or twice), as bytes, percent-encoded.
    * Noise: kazoo warns on every failed connection attempt (``Connection dropped: socket
      connection error: Connection refused`` every few dozen milliseconds). The store reports
      what matters itself (connection lost, session expired, credentials refused, a connect
      timeout naming the last attempt), so kazoo's warnings go out at DEBUG; the latest is kept in
      :attr:`last_demoted`.
    """

    def __init__(self, logger: logging.Logger, secrets: tuple[str, ...]):
        super().__init__(logger, {})
        forms = {form for secret in secrets if secret for form in secret_forms(secret)}
        # Longest first, so "user:password" is replaced before "password" alone.
        self._secrets = tuple(sorted(forms, key=len, reverse=True))
        self.last_demoted: str | None = None

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        return self.redact(str(msg)), kwargs

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        demoted = level == logging.WARNING
        if demoted:
            level = logging.DEBUG
        if not demoted and not self.isEnabledFor(level):
            return
        if args:
            try:
                msg = str(msg) % args
            except (TypeError, ValueError):
                msg = " ".join([str(msg), *map(str, args)])
        text, options = self.process(msg, kwargs)
        if demoted:
            self.last_demoted = text.removeprefix("Connection dropped: ")
            if not self.isEnabledFor(level):
                return
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


def secret_forms(secret: str) -> set[str]:
    """``secret`` as a log line may show it: itself, escaped as inside a ``repr`` (with either
    quote, non-ASCII kept or ``\\x``-escaped, as bytes), each of those escaped once more (a repr
    of a repr), and percent-encoded as in a URL."""
    once = {
        secret,
        _escaped(secret, "'"),
        _escaped(secret, '"'),
        _escaped(secret, "'", ascii_only=True),
        _escaped(secret, '"', ascii_only=True),
        repr(secret.encode("utf-8", "surrogatepass"))[2:-1],
    }
    twice = {_escaped(form, mark) for form in once for mark in ("'", '"')}
    encoded = {quote(secret, safe=""), quote(secret), quote_plus(secret)}
    encoded |= {_HEX_ESCAPE.sub(lambda m: m[0].lower(), form) for form in encoded}  # %5c too
    return once | twice | encoded


def _escaped(text: str, quote_char: str, *, ascii_only: bool = False) -> str:
    """``text`` as it appears between ``quote_char`` quotes in Python's ``repr``."""
    out: list[str] = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == quote_char:
            out.append("\\" + char)
        elif char.isprintable() and (char.isascii() or not ascii_only):
            out.append(char)
        else:
            out.append(ascii(char)[1:-1])  # \t, \n, \x00, \u00e9 ...
    return "".join(out)
