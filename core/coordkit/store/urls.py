"""Store URLs: ``memory://name``, ``zookeeper://[user:pass@]h1:p1,h2:p2/chroot``,
``redis://[:pass@]host:port/db`` and ``rediss://``, and the one parser for numbers in their query
parameters.

Credentials never appear in ``repr``, ``str`` or errors. Every error about a URL quotes it as
:func:`redact` shows it, computed from the raw text *before* anything is parsed, so a malformed URL
(no scheme, an unencoded ``/`` in the password, a bad percent-escape) cannot leak either.

Parsing is strict where a lenient guess could move part of a password into the host, path or
query (where it would be shown): an ``@`` after the authority (``/``, ``?`` or ``#`` inside a user
name or password, unencoded) is an error, as are ``%`` signs that do not start a ``%XX`` escape,
user info that does not decode as UTF-8, raw spaces and control characters.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import NoReturn
from urllib.parse import parse_qsl, quote, unquote

import attrs

from coordkit.errors import InvalidURLError
from coordkit.support import numbers

REDACTED = "***"

#: Raises :class:`InvalidURLError` about the URL being parsed.
_Fail = Callable[[str], NoReturn]

#: RFC 3986 scheme characters (plus ``_``, which plugin names may use).
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-_]*")
#: A registered name (RFC 3986 reg-name without percent-escapes; ``,`` separates hosts).
_HOST = re.compile(r"[A-Za-z0-9._~!$&'()*+;=\-]+")
_IPV6 = re.compile(r"[0-9A-Fa-f:.]+")
_PORT = re.compile(r"[0-9]{1,5}")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f-\x9f]")
#: Query parameters whose values are shown as ``***`` (no built-in store takes secrets in the
#: query, but a user may try ``?password=`` as other clients accept it).
_SECRET_NAME = re.compile(r"pass|secret|token|credential", re.IGNORECASE)
_SECRET_PARAM = re.compile(
    r"([?&][^=&#]*(?:pass|secret|token|credential)[^=&#]*=)[^&#]*", re.IGNORECASE
)
_ENCODE_HINT = (
    "a user name or password must have '/', '?', '#' and '@' percent-encoded "
    "(%2F %3F %23 %40), and a path or parameter '@' (%40)"
)
# Characters left as they are when a redacted URL is written back out.
_USER_SAFE = "!$&'()*+;="
_PATH_SAFE = "/:=+,;!$&'()*"
_QUERY_SAFE = "/:,;!$'()*"


def _split_scheme(text: str) -> tuple[str | None, str]:
    """``(scheme, rest)``; the scheme is ``None`` unless what precedes ``://`` could be one, so
    ``user:pass@host://...`` counts as having no scheme (and its user info is still found)."""
    head, sep, rest = text.partition("://")
    if sep and _SCHEME.fullmatch(head):
        return head, rest
    if sep and not any(c in head for c in ":@/?#"):
        return head, rest  # an invalid scheme, but nothing of the user info
    return None, text


def redact(text: str) -> str:
    """``text`` with its user info replaced by ``user:***@`` (or ``***@``), whether or not it is
    a valid URL: everything before the *last* ``@`` is taken as user info, so a password holding
    unencoded ``/``, ``?``, ``#`` or ``@`` is hidden whole. Values of query parameters named like
    secrets (``password=``, ``token=``) are replaced too."""
    scheme, rest = _split_scheme(text)
    head = "" if scheme is None else f"{scheme}://"
    at = rest.rfind("@")
    if at >= 0:
        user, colon, _secret = rest[:at].partition(":")
        # Show the user name only when it cannot hold part of a misplaced password.
        plain_user = colon and not any(c in user for c in "/?#")
        shown = f"{user}:{REDACTED}" if plain_user else REDACTED
        rest = f"{shown}@{rest[at + 1 :]}"
    return _SECRET_PARAM.sub(rf"\1{REDACTED}", head + rest)


@attrs.frozen(repr=False)
class StoreURL:
    scheme: str
    hosts: tuple[tuple[str, int | None], ...] = ()
    path: str = ""
    username: str | None = None
    password: str | None = attrs.field(default=None, eq=False)
    query: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, url: str) -> StoreURL:
        """Parse ``url``; :class:`InvalidURLError` (one line, credentials redacted) if it is not
        a store URL."""
        if not isinstance(url, str):
            raise InvalidURLError(f"a store URL must be text, got {type(url).__name__}")
        safe = redact(url)  # before anything can fail: every message below quotes only this

        def fail(problem: str) -> NoReturn:
            raise InvalidURLError(f"store URL {_quote_url(safe)}: {problem}")

        try:
            url.encode("utf-8")
        except UnicodeEncodeError:
            fail("holds characters that are not text (undecodable bytes?)")
        scheme, rest = _split_scheme(url)
        if scheme is None:
            raise InvalidURLError(
                f"store URL {_quote_url(safe)} has no scheme; expected e.g. "
                "memory://name, zookeeper://host:2181/chroot or redis://host:6379/0"
            )
        if not _SCHEME.fullmatch(scheme):
            fail(f"scheme {scheme!r} is not valid")
        scheme = scheme.lower()
        if _CONTROL_OR_SPACE.search(url):
            fail("holds a space or control character; percent-encode it (e.g. %20, %09)")
        end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
        authority, tail = rest[:end], rest[end:]
        if "@" in tail:
            fail(f"an '@' follows the host; {_ENCODE_HINT}")
        if "#" in tail:
            fail("'#' is not part of a store URL; percent-encode it as %23")
        path_text, _, query_text = tail.partition("?")
        username = password = None
        if "@" in authority:
            userinfo, authority = authority.rsplit("@", 1)
            user, colon, secret = userinfo.partition(":")
            username = _decode(user, "the user info", fail) or None
            password = _decode(secret, "the user info", fail) if colon else None
        parsed_hosts = (_parse_host(item, fail) for item in authority.split(",") if item)
        hosts = tuple(hp for hp in parsed_hosts if hp != ("", None))  # (":" names no host)
        path = _decode(path_text, "the path", fail)
        if _BAD_ESCAPE.search(query_text):
            fail("the query has a '%' that does not start a percent-escape (%XX)")
        try:
            query = tuple(parse_qsl(query_text, keep_blank_values=True, errors="strict"))
        except (UnicodeDecodeError, ValueError):
            fail("the query does not decode as UTF-8")
        names = [name for name, _ in query]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            fail(f"parameter(s) {', '.join(map(repr, twice))} given more than once")
        return cls(scheme, hosts, path, username, password, query)

    @property
    def params(self) -> dict[str, str]:
        return dict(self.query)

    @property
    def host_string(self) -> str:
        return ",".join(_host_text(h, p) for h, p in self.hosts)

    @property
    def where(self) -> str:
        """How errors about this URL name it: ``zookeeper URL 'zookeeper://u:***@h:2181/x'``."""
        return f"{self.scheme} URL {_quote_url(self.redacted())}"

    def redacted(self) -> str:
        """The URL with the password replaced by ``***``: a valid URL that parses back to this
        one (password aside)."""
        auth = ""
        if self.username is not None or self.password is not None:
            user = quote(self.username or "", safe=_USER_SAFE)
            auth = user + (f":{REDACTED}" if self.password is not None else "") + "@"
        query = "&".join(
            f"{quote(k, safe=_QUERY_SAFE)}="
            + (REDACTED if _SECRET_NAME.search(k) else quote(v, safe=_QUERY_SAFE))
            for k, v in self.query
        )
        return f"{self.scheme}://{auth}{self.host_string}{quote(self.path, safe=_PATH_SAFE)}" + (
            f"?{query}" if query else ""
        )

    def __repr__(self) -> str:
        return f"StoreURL({self.redacted()!r})"

    __str__ = redacted


def _quote_url(text: str) -> str:
    """``repr(text)`` for a message, shortened when very long (a URL is not quoted in full twice
    in one line, as ``where`` and as a value)."""
    if len(text) <= 200:
        return repr(text)
    return f"{text[:100]!r}... ({len(text)} characters)"


def _host_text(host: str, port: int | None) -> str:
    text = f"[{host}]" if ":" in host else host
    return text if port is None else f"{text}:{port}"


def _decode(text: str, what: str, fail: _Fail) -> str:
    if _BAD_ESCAPE.search(text):
        fail(f"{what} has a '%' that does not start a percent-escape (%XX)")
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        fail(f"{what} does not decode as UTF-8")


def _parse_host(item: str, fail: _Fail) -> tuple[str, int | None]:
    if item.startswith("["):  # IPv6 literal
        host, bracket, port_text = item[1:].partition("]")
        if not bracket or not _IPV6.fullmatch(host) or (port_text and port_text[0] != ":"):
            fail(f"host {item!r} is not a valid IPv6 address in brackets")
        port_text = port_text[1:]
    else:
        host, _, port_text = item.partition(":")
        if host and not _HOST.fullmatch(host):
            fail(
                f"host {host!r} is not a valid host name (letters, digits, '-', '.', '_'; "
                "IPv6 addresses in brackets)"
            )
    if not port_text:
        return host, None
    if not _PORT.fullmatch(port_text):
        fail(f"port {port_text!r} of host {host!r} is not a number")
    port = int(port_text)
    if not 0 < port < 65536:
        fail(f"port {port} of host {host!r} is out of range (1 to 65535)")
    return host, port


# -- numbers in query parameters and open options ------------------------------------------------

#: Durations (timeouts): from a millisecond to a day.
MIN_SECONDS = 0.001
MAX_SECONDS = numbers.MAX_SECONDS
# Plain decimal numbers only (``float()`` would also take ``inf``, ``nan``, ``1_0`` and non-ASCII
# digits): the same rules as every other number a user gives (:mod:`coordkit.support.numbers`).
_DECIMAL = numbers.DECIMAL
_INTEGER = numbers.INTEGER
_NOT_FINITE = {"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan", "+nan", "-nan"}


def parse_seconds(
    where: str,
    name: str,
    value: object,
    *,
    low: float = MIN_SECONDS,
    high: float = MAX_SECONDS,
) -> float:
    """``value`` (URL parameter text or an open option's number) as seconds in ``[low, high]``.

    :param where: how the message names the URL, e.g. :attr:`StoreURL.where`.
    :raises InvalidURLError: naming the parameter, the value and the accepted range.
    """
    accepted = f"accepted: {low:g} to {high:g} seconds"
    shown = _shown(value)
    text = value.strip().lower() if isinstance(value, str) else ""
    if text in _NOT_FINITE or (isinstance(value, float) and not math.isfinite(value)):
        raise InvalidURLError(f"{where}: {name}={shown} is not a finite number; {accepted}")
    number = _float_of(value)
    if number is None:
        raise InvalidURLError(f"{where}: {name}={shown} is not a number of seconds; {accepted}")
    if number <= 0:
        raise InvalidURLError(f"{where}: {name} must be positive, got {shown}; {accepted}")
    if not low <= number <= high:  # also what overflowed to infinity
        raise InvalidURLError(f"{where}: {name}={shown} is out of range; {accepted}")
    return number


def parse_int(where: str, name: str, value: object, *, low: int, high: int) -> int:
    """``value`` (URL parameter text or an option's int) as a whole number in ``[low, high]``.

    :raises InvalidURLError: naming the parameter, the value and the accepted range.
    """
    accepted = f"accepted: {low} to {high}"
    shown = _shown(value)
    number = _int_of(value)
    if number is None:
        raise InvalidURLError(f"{where}: {name}={shown} is not a whole number; {accepted}")
    if not low <= number <= high:
        raise InvalidURLError(f"{where}: {name}={shown} is out of range; {accepted}")
    return number


def _shown(value: object) -> str:
    """``repr(value)``, shortened: a value thousands of digits long needs no full quote."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text)} characters)"


def _float_of(value: object) -> float | None:
    if isinstance(value, bool):  # an int subclass, but never meant as a number
        return None
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            return math.inf
    if isinstance(value, float):
        return value
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        return float(value.strip())
    return None


def _int_of(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None  # (False for inf and nan)
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value.strip())
    return None
