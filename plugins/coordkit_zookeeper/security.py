"""Authentication to ZooKeeper, the ACLs on nodes the store creates, and credentials kept out of logs.

* Authentication: with ``user:pass@`` in the URL the client authenticates with ZooKeeper's
  ``digest`` scheme, sent again after every reconnect; with ``auth=sasl`` or ``jaas=FILE`` it
  authenticates with SASL DIGEST-MD5 when each connection opens, as a Kafka broker given a JAAS
  ``Client`` section does.
* ACLs, as Kafka's ``zookeeper.set.acl`` (``ZkData.defaultAcls``): when secure, a node is created
  with ``CREATOR_ALL_ACL`` (ZooKeeper expands ``auth`` into the session's identity, ``digest:user:
  hash`` or ``sasl:user``) plus ``world:anyone`` read, but on Kafka's sensitive paths (SCRAM
  credentials, broker configs, delegation tokens), which get no world access; the old consumer
  path ``/consumers`` stays open, as Kafka keeps it. Otherwise ``world:anyone`` may do everything,
  ZooKeeper's default. Paths are the chroot's, as a Kafka broker's ZooKeeper client sees them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, MutableMapping
from typing import Any
from urllib.parse import quote, quote_plus

from coordkit_zookeeper.config import ZooKeeperConfig

REDACTED = "***"
#: kazoo also logs the session password (hex and raw bytes) when it connects; whoever has it can
#: take the session over.
_HEX_ESCAPE = re.compile(r"%[0-9A-F]{2}")
_SESSION_PASSWORD = re.compile(r"(session_passwd: |passwd=)b(['\"]).*?(?<!\\)\2")
#: ... and each SASL token it sends: DIGEST-MD5's response is a hash of the password, which a
#: reader of the log could attack offline.
_SASL_TOKEN = re.compile(r"(SASL\(challenge=)b(['\"]).*?(?<!\\)\2")


#: Kafka's ``ZkData.SensitiveRootPaths``: ``ConfigEntityTypeZNode.path(USER)`` (SCRAM
#: credentials), ``ConfigEntityTypeZNode.path(BROKER)`` (broker configs, encoded passwords among
#: them) and ``DelegationTokensZNode.path``.
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
#: Kafka's ``ConsumerPathZNode.path``: the old consumers write under it, so it stays open.
CONSUMER_PATH = "/consumers"
SASL_MECHANISM = "DIGEST-MD5"


def auth_data(config: ZooKeeperConfig) -> list[tuple[str, str]]:
    """kazoo's ``auth_data``: the digest credential, sent again after every reconnect."""
    credential = config.digest_credential
    return [("digest", credential)] if credential else []


def sasl_options(config: ZooKeeperConfig) -> dict[str, str] | None:
    """kazoo's ``sasl_options``: DIGEST-MD5 with the URL's or the JAAS file's credentials."""
    if not config.sasl or config.username is None or config.password is None:
        return None
    return {"mechanism": SASL_MECHANISM, "username": config.username, "password": config.password}


def sensitive_path(path: str) -> bool:
    """Kafka's ``ZkData.sensitivePath``: a prefix test on the text, as Kafka's."""
    return any(path.startswith(root) for root in SENSITIVE_ROOT_PATHS)


def default_acls(secure: bool, path: str) -> list[Any]:
    """Kafka's ``ZkData.defaultAcls(isSecure, path)``: the ACL of a node created at ``path``."""
    from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

    if secure and path != CONSUMER_PATH:
        if sensitive_path(path):
            return list(CREATOR_ALL_ACL)
        return [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]
    return list(OPEN_ACL_UNSAFE)


def node_acls(config: ZooKeeperConfig) -> Callable[[str], list[Any]]:
    """The ACL of a node this store creates, by its path (inside the chroot)."""
    secure = config.set_acl
    open_acl = default_acls(False, "/")
    if not secure:
        return lambda _path: open_acl
    plain = default_acls(True, "/")
    return lambda path: default_acls(True, path) if path.startswith(_SPECIAL) else plain


#: First characters of every path whose ACL is not the plain secure one (a quick test first).
_SPECIAL = ("/config/", "/delegation_token/", CONSUMER_PATH)


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
        if "SASL(" in text:
            text = _SASL_TOKEN.sub(rf"\1{REDACTED}", text)
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
