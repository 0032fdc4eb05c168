"""Issue 12, fuzzed: bad store URLs never crash a parser and never show a password.

Random and hostile URLs (user info holding ``/ @ : % \\t \\``, bad percent-escapes, undecodable
text, random schemes, hosts, ports and query parameters) go to :meth:`StoreURL.parse` and to
every backend's configuration parsing. Whatever happens, the only exceptions are
``CoordkitError``/``ValueError`` subclasses with one-line messages, and no message, ``repr`` or
redacted form holds the password — as it is, percent-decoded, percent-encoded or repr-escaped.
Passwords carry marker tokens (``Q1234Z``) that nothing else generated here can contain, so a
leaked *fragment* of a password (``port 'Zq9s'``) is caught too. Valid URLs round-trip through
their redacted form.
"""

from __future__ import annotations

import logging
import re
import string
from collections.abc import Callable
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from coordkit.errors import CoordkitError, InvalidURLError
from coordkit.store.urls import MAX_SECONDS, MIN_SECONDS, StoreURL, parse_int, parse_seconds, redact
from coordkit_memory import MemoryConfig
from coordkit_redis.config import RedisConfig
from coordkit_zookeeper.config import ZooKeeperConfig
from coordkit_zookeeper.security import RedactingLogger

FUZZ = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
TOKEN = re.compile(r"Q[0-9]{4}Z")
tokens = st.from_regex(TOKEN, fullmatch=True)

# Nothing but a password contains an upper-case Q.
_LOWER = string.ascii_lowercase + string.digits + "-._"
HOSTILE = ["/", "@", ":", "%", "\t", "\\", "?", "#", "&", "=", "+", " ", "'", '"', ",", "[", "]"]
ODD = ["%zz", "%C3", "%", "%2F", "%40", "%5C", "%09", "é", "ß", "\udcff", "\x00", "\n", "\u2028"]
hostile = st.sampled_from(HOSTILE + ODD)
junk = st.text(alphabet=_LOWER, max_size=4)

#: A password: at least one marker token, mixed with hostile characters and junk.
passwords = st.builds(
    lambda first, rest: first + "".join(rest),
    tokens,
    st.lists(st.one_of(tokens, hostile, junk), max_size=6),
)
usernames = st.lists(st.one_of(junk, hostile), max_size=4).map("".join)

KNOWN_SCHEMES = ["memory", "zookeeper", "redis", "rediss", "ZooKeeper"]
schemes = st.one_of(
    st.sampled_from(KNOWN_SCHEMES),
    st.from_regex(r"[a-z][a-z0-9+.\-]{0,8}", fullmatch=True),
    st.sampled_from(["", "9bad", "x y", "red is", "http"]),
)
host_names = st.one_of(
    st.sampled_from(
        ["h", "127.0.0.1", "[::1]", "zk-1.example", "", "bad host", "é", "h%41", "[::1"]
    ),
    st.text(alphabet=_LOWER, min_size=1, max_size=8),
)
ports = st.one_of(
    st.none(),
    st.integers(-5, 70_000).map(str),
    st.sampled_from(["", "abc", "٣", "2181x", "0", "65536", "99999999999"]),
)
hosts = st.lists(
    st.tuples(host_names, ports).map(lambda hp: hp[0] if hp[1] is None else f"{hp[0]}:{hp[1]}"),
    max_size=3,
).map(",".join)
paths = st.one_of(
    st.sampled_from(["", "/", "/x", "/kafka/prod", "/0", "/15", "/zero", "//", "/a//b", "/%zz"]),
    st.lists(st.one_of(junk, st.sampled_from(["/", "%", "é", "%2F", "\\"])), max_size=5).map(
        lambda parts: "/" + "".join(parts)
    ),
)
NUMBER_NAMES = [
    "session_timeout",
    "connect_timeout",
    "request_timeout",
    "socket_timeout",
    "stream_maxlen",
]
param_names = st.one_of(
    st.sampled_from(
        [
            *NUMBER_NAMES,
            *("prefix", "tls", "multi_read", "ca", "ssl_cert_reqs"),
            # ZooKeeper's authentication and ACLs (#36 item 4): the password going to SASL too.
            *("auth", "set_acl", "jaas", "jaas_section"),
        ]
    ),
    st.text(alphabet=_LOWER + "%&=", max_size=6),
)
numbers_text = st.one_of(
    st.sampled_from(["abc", "inf", "-inf", "nan", "NaN", "-1", "0", "1e400", "1e-9", "1_0", "٣"]),
    st.just("9" * 400),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**30), 10**30).map(str),
)
param_values = st.one_of(
    numbers_text,
    junk,
    st.sampled_from(["true", "maybe", "a{b}", "%", "é", "sasl", "digest", "false", "/no/file"]),
)
queries = st.lists(st.tuples(param_names, param_values), max_size=4)


def compose(
    scheme: str | None,
    user: str,
    password: str,
    encode: bool,
    host: str,
    path: str,
    query: list[tuple[str, str]],
) -> str:
    # (Encoded, a lone surrogate becomes bytes that are not UTF-8, as from a raw byte string.)
    userinfo = f"{_quoted(user)}:{_quoted(password)}" if encode else f"{user}:{password}"
    text = f"{userinfo}@{host}{path}"
    if query:
        text += "?" + "&".join(f"{k}={v}" for k, v in query)
    return text if scheme is None else f"{scheme}://{text}"


def _quoted(text: str) -> str:
    return quote(text, safe="", errors="surrogatepass")


def assert_hidden(text: str, password: str) -> None:
    """No marker token of ``password`` (so no form and no fragment of it) is in ``text``."""
    for token in TOKEN.findall(password):
        assert token not in text, f"password fragment {token!r} leaked: {text!r}"
    for form in (password, _quoted(password), repr(password)[1:-1]):
        assert form not in text


def assert_clean_error(exc: BaseException, password: str) -> None:
    assert isinstance(exc, CoordkitError | ValueError), f"{type(exc).__name__}: {exc}"
    assert not isinstance(exc, TypeError)
    message = str(exc)
    assert message
    assert "\n" not in message
    assert "\r" not in message
    assert_hidden(message, password)
    assert_hidden(repr(exc), password)


BACKEND_CONFIGS: list[tuple[str, Callable[[StoreURL], object]]] = [
    ("memory", MemoryConfig.from_url),
    ("zookeeper", ZooKeeperConfig.from_url),
    ("redis", lambda url: RedisConfig.from_url(url, {})),
]


def check(text: str, password: str) -> StoreURL | None:
    """Parse ``text`` and every backend's configuration of it; return the URL if it parsed."""
    try:
        url = StoreURL.parse(text)
    except Exception as exc:
        assert_clean_error(exc, password)
        return None
    for shown in (repr(url), str(url), url.redacted(), url.where):
        assert_hidden(shown, password)
    again = StoreURL.parse(url.redacted())
    assert again == url  # the password is not compared (it is *** there)
    assert again.redacted() == url.redacted()
    for _name, configure in BACKEND_CONFIGS:
        try:
            config = configure(url)
        except Exception as exc:
            assert_clean_error(exc, password)
        else:
            assert_hidden(repr(config), password)
    return url


# -- the fuzz tests --------------------------------------------------------------------------------


@FUZZ
@given(
    scheme=st.one_of(st.none(), schemes),
    user=usernames,
    password=passwords,
    encode=st.booleans(),
    host=hosts,
    path=paths,
    query=queries,
)
@example(None, "bob", "Q9999ZEcReT", False, "127.0.0.1:2181", "/x", [])  # no scheme
@example("zookeeper", "bob", "Q9999Z/EcReT", False, "127.0.0.1:2181", "/x", [])  # '/' in password
@example("redis", "", "Q9999Z%zz", False, "h", "/0", [])  # a bad percent-escape
@example("redis", "", "Q9999Z%C3", False, "h", "/0", [])  # not UTF-8 once decoded
@example("redis", "", "Q9999Z\udcff", True, "h", "/0", [])  # undecodable bytes
@example("redis", "u", "Q9999Z?x", False, "h", "/0", [("prefix", "a")])  # '?' in password
def test_hostile_urls_fail_cleanly_and_never_show_the_password(
    scheme: str | None,
    user: str,
    password: str,
    encode: bool,
    host: str,
    path: str,
    query: list[tuple[str, str]],
) -> None:
    text = compose(scheme, user, password, encode, host, path, query)
    url = check(text, password)
    if url is not None and encode:
        # Percent-encoded user info is taken exactly as written.
        assert (url.username, url.password) == (user or None, password)


@FUZZ
@given(st.text(), passwords)
def test_any_text_at_all_is_a_clean_error_or_a_url(text: str, password: str) -> None:
    check(text, password)
    check(text + f"://u:{password}@h", password)


@FUZZ
@given(
    scheme=st.sampled_from(["memory", "zookeeper", "redis", "rediss"]),
    user=st.text(max_size=8).filter(lambda s: "Q" not in s),
    password=passwords,
    host=st.sampled_from(["h", "127.0.0.1", "[::1]", "zk-1.example"]),
    port=st.one_of(st.none(), st.integers(1, 65535)),
    path=st.text(max_size=10).filter(lambda s: "Q" not in s).map(lambda s: "/" + s),
    query=st.lists(
        st.tuples(
            st.text(min_size=1, max_size=6).filter(lambda s: "Q" not in s),
            st.text(max_size=6).filter(lambda s: "Q" not in s),
        ),
        max_size=3,
        unique_by=lambda kv: kv[0],
    ),
)
def test_valid_urls_parse_to_their_parts_and_round_trip_redacted(
    scheme: str,
    user: str,
    password: str,
    host: str,
    port: int | None,
    path: str,
    query: list[tuple[str, str]],
) -> None:
    """Every well-formed URL (parts percent-encoded) parses, whatever its parts hold."""
    password = password.encode("utf-8", "replace").decode("utf-8")  # text, not stray surrogates
    user = user.encode("utf-8", "replace").decode("utf-8")
    path = path.encode("utf-8", "replace").decode("utf-8")
    query = [
        (k.encode("utf-8", "replace").decode(), v.encode("utf-8", "replace").decode())
        for k, v in query
    ]
    netloc = host if port is None else f"{host}:{port}"
    text = (
        f"{scheme}://{quote(user, safe='')}:{quote(password, safe='')}@{netloc}"
        f"{quote(path, safe='/')}"
    )
    if query:
        text += "?" + "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in query)
    url = StoreURL.parse(text)
    assert url.scheme == scheme
    assert (url.username, url.password) == (user or None, password)
    assert url.hosts == ((host.strip("[]"), port),)
    assert url.path == path
    assert url.query == tuple(query)
    assert check(text, password) == url


@FUZZ
@given(st.one_of(numbers_text, param_values, st.floats(), st.integers(), st.booleans()))
def test_numbers_parse_into_their_range_or_name_parameter_value_and_range(value: object) -> None:
    for parse, low, high in (
        (lambda v: parse_seconds("URL 'x'", "session_timeout", v), MIN_SECONDS, MAX_SECONDS),
        (lambda v: parse_int("URL 'x'", "stream_maxlen", v, low=1, high=10**8), 1, 10**8),
    ):
        try:
            number = parse(value)
        except InvalidURLError as exc:
            message = str(exc)
            assert "session_timeout" in message or "stream_maxlen" in message
            assert "accepted: " in message
            assert "\n" not in message
            assert len(message) < 200
        else:
            assert low <= number <= high


@FUZZ
@given(passwords, st.sampled_from(["%5C", "%09", "%0A", "%27", "%22", "%C3%A9", "%00"]))
def test_the_kazoo_logger_redacts_every_escaped_form_of_the_password(
    password: str, escape: str
) -> None:
    """A password holding ``%5C`` or ``%09`` shows up escaped in kazoo's DEBUG log of the Auth
    packet (``auth='alice:bs\\\\\\\\pw-...'``); every form is redacted."""
    password = (password + escape.replace("%", "\\x")).encode("utf-8", "replace").decode("utf-8")
    url = StoreURL.parse(f"zookeeper://alice:{quote(password, safe='')}@h:2181/x")
    config = ZooKeeperConfig.from_url(url)
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    target = logging.getLogger("coordkit.test.fuzz-redaction")
    target.setLevel(1)
    target.propagate = False
    handler = Collect()
    target.addHandler(handler)
    try:
        logger = RedactingLogger(target, config.secrets)
        auth = f"Auth(auth_type=0, scheme='digest', auth={config.digest_credential!r})"
        logger.log(5, "Sending request(xid=%s): %s", -4, auth)
        logger.debug("%r", auth)  # a repr of the repr: escaped twice
        logger.debug("url %s", f"zookeeper://alice:{quote(password, safe='')}@h")
        logger.debug("bytes %r", password.encode())
    finally:
        target.removeHandler(handler)
    assert len(records) == 4
    for record in records:
        assert_hidden(record, password)


@FUZZ
@given(st.text(), passwords, st.text(alphabet=_LOWER + ":/@?", max_size=8))
def test_redact_hides_user_info_of_any_text(prefix: str, password: str, after: str) -> None:
    text = f"{prefix}:{password}@{after.replace('@', '')}"
    assert_hidden(redact(text), password)


# -- the examples, one each ----------------------------------------------------------------


def test_url_without_scheme_does_not_echo_the_password() -> None:
    """``coordkit tree --store 'bob:Zq9sEcReT@127.0.0.1:2181/x'`` said ``store URL
    'bob:Zq9sEcReT@...' has no scheme``."""
    with pytest.raises(InvalidURLError) as info:
        StoreURL.parse("bob:Zq9sEcReT@127.0.0.1:2181/x")
    assert str(info.value).startswith("store URL 'bob:***@127.0.0.1:2181/x' has no scheme")
    assert "Zq9s" not in str(info.value)


def test_url_with_an_unencoded_slash_in_the_password_does_not_echo_part_of_it() -> None:
    """A password holding an unencoded ``/`` said ``port 'Zq9s' of host 'bob' is not a number``."""
    with pytest.raises(InvalidURLError) as info:
        StoreURL.parse("zookeeper://bob:Zq9s/EcReT@127.0.0.1:2181/x")
    message = str(info.value)
    assert "Zq9s" not in message
    assert "EcReT" not in message
    assert "zookeeper://bob:***@127.0.0.1:2181/x" in message
    assert "%2F" in message  # says how to write it


@pytest.mark.parametrize(
    ("url", "configure", "value", "problem"),
    [
        ("memory://n?session_timeout=abc", "memory", "'abc'", "is not a number of seconds"),
        ("zookeeper://h:1/x?session_timeout=inf", "zookeeper", "'inf'", "is not a finite number"),
        ("zookeeper://h:1/x?session_timeout=nan", "zookeeper", "'nan'", "is not a finite number"),
        ("zookeeper://h:1/x?session_timeout=-1", "zookeeper", "'-1'", "must be positive"),
        ("zookeeper://h:1/x?connect_timeout=0", "zookeeper", "'0'", "must be positive"),
        ("zookeeper://h:1/x?request_timeout=1e400", "zookeeper", "'1e400'", "is out of range"),
        ("zookeeper://h:1/x?session_timeout=" + "9" * 30, "zookeeper", "'999", "is out of range"),
        ("redis://h/0?socket_timeout=inf", "redis", "'inf'", "is not a finite number"),
        ("redis://h/0?stream_maxlen=1e3", "redis", "'1e3'", "is not a whole number"),
        ("redis://h/99999999999", "redis", "'99999999999'", "is out of range"),
    ],
)
def test_numbers_in_urls_are_one_error_naming_parameter_value_and_range(
    url: str, configure: str, value: str, problem: str
) -> None:
    """``memory://n?session_timeout=abc`` and ``zookeeper://...?session_timeout=inf`` (also
    ``nan``, ``-1``, ``0``, ``1e400``, huge) were tracebacks or unclear."""
    parse = dict(BACKEND_CONFIGS)[configure]
    with pytest.raises(InvalidURLError) as info:
        parse(StoreURL.parse(url))
    message = str(info.value)
    name = url.rsplit("?", 1)[-1].split("=", 1)[0] if "?" in url else "database"
    assert name in message
    assert value in message
    assert problem in message
    assert re.search(r"accepted: \S+ to \S+", message)
    assert "\n" not in message
