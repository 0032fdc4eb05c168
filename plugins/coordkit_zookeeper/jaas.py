"""The ``Client`` section of a JAAS file: the SASL identity a Kafka broker gives ZooKeeper.

A Kafka 3.9 broker authenticates to ZooKeeper with SASL when the JVM is started with
``-Djava.security.auth.login.config=FILE`` and FILE has a ``Client`` section (ZooKeeper's
``zookeeper.sasl.clientconfig`` names another)::

    Client {
        org.apache.zookeeper.server.auth.DigestLoginModule required
        username="kafka"
        password="kafka-secret";
    };

``zookeeper://host:2181/chroot?jaas=FILE`` reads the same file, so coordkit and the brokers share
one identity. Only ZooKeeper's ``DigestLoginModule`` (SASL DIGEST-MD5) is read: Kerberos
(``Krb5LoginModule``, GSSAPI) is refused in one line. No message here quotes a value of the file:
it holds the password.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

DEFAULT_SECTION = "Client"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
#: A JAAS file is a few lines; anything this large is not one.
MAX_BYTES = 1 << 20

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<comment>//[^\n]*|/\*.*?\*/)
      | "(?P<quoted>(?:[^"\\]|\\.)*)"
      | (?P<punct>[{};=])
      | (?P<word>[^\s{};="]+)
    )""",
    re.VERBOSE | re.DOTALL,
)


class JaasError(ValueError):
    """The file cannot be read, or has no usable section; the message names the file and the
    section, never a value."""


@attrs.frozen(repr=False)
class DigestLogin:
    """``username`` and ``password`` of a DigestLoginModule entry."""

    username: str
    password: str = attrs.field(eq=False)

    def __repr__(self) -> str:
        return f"DigestLogin(username={self.username!r})"


@attrs.frozen
class _Entry:
    module: str
    options: dict[str, str]


def read_digest_login(path: str, section: str = DEFAULT_SECTION) -> DigestLogin:
    """The DigestLoginModule credentials of ``section`` in the JAAS file at ``path``."""
    where = f"JAAS file {path!r}"
    try:
        raw = Path(path).read_bytes()[: MAX_BYTES + 1]
    except OSError as exc:
        raise JaasError(f"{where}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    if len(raw) > MAX_BYTES:
        raise JaasError(f"{where}: larger than {MAX_BYTES} bytes, not a JAAS file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise JaasError(f"{where}: not UTF-8 text") from None
    sections = _parse(text, where)
    # Names the file gives (other sections, modules) are not quoted either: in a malformed file
    # a password may stand where a name should.
    if section not in sections:
        raise JaasError(f"{where}: no {section} section")
    entries = sections[section]
    digest = [e for e in entries if e.module == DIGEST_LOGIN_MODULE]
    if not digest:
        raise JaasError(
            f"{where}: section {section} has no {DIGEST_LOGIN_MODULE} (SASL DIGEST-MD5) entry; "
            "coordkit supports no other ZooKeeper SASL mechanism (Kerberos included)"
        )
    options = digest[0].options
    missing = [name for name in ("username", "password") if not options.get(name)]
    if missing:
        raise JaasError(f"{where}: section {section} gives no {' and no '.join(missing)}")
    return DigestLogin(options["username"], options["password"])


def _parse(text: str, where: str) -> dict[str, list[_Entry]]:
    tokens = _tokens(text, where)
    sections: dict[str, list[_Entry]] = {}
    i = 0

    def expect(kind: str, what: str) -> str:
        nonlocal i
        if i >= len(tokens) or tokens[i][0] != kind or (kind == "punct" and tokens[i][1] != what):
            raise JaasError(f"{where}: not JAAS syntax (expected {what!r})")
        i += 1
        return tokens[i - 1][1]

    while i < len(tokens):
        name = expect("word", "a section name")
        expect("punct", "{")
        entries: list[_Entry] = []
        while i < len(tokens) and tokens[i] != ("punct", "}"):
            module = expect("word", "a login module class")
            expect("word", "a control flag")
            options: dict[str, str] = {}
            while i < len(tokens) and tokens[i] != ("punct", ";"):
                key = expect("word", "an option name")
                expect("punct", "=")
                if i >= len(tokens) or tokens[i][0] not in ("word", "quoted"):
                    raise JaasError(f"{where}: not JAAS syntax (option {key} has no value)")
                options[key] = tokens[i][1]
                i += 1
            expect("punct", ";")
            entries.append(_Entry(module, options))
        expect("punct", "}")
        expect("punct", ";")
        sections[name] = entries
    return sections


def _tokens(text: str, where: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None:
            raise JaasError(f"{where}: not JAAS syntax (an unterminated quote or comment?)")
        position = match.end()
        kind = match.lastgroup
        if kind == "comment" or kind is None:
            continue
        value = match[kind]
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value)
        out.append((kind, value))
    return out
