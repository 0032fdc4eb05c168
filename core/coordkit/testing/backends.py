"""What the store suite runs against: a :class:`StoreBackend` hands out fresh store URLs, opens
stores, and (optionally) inflicts faults on them; :class:`Capability` names what a backend offers,
and :func:`requires` marks the tests that need a capability."""

from __future__ import annotations

import enum
import itertools
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.store import MetadataStore, SessionState
from coordkit.testing.servers.paths import NetworkPath, proxied_path

__all__ = ["Capability", "StoreBackend", "StoreFactory", "UrlBackend", "requires"]

#: Opens another session on the test's namespace (the suite's ``open_session`` fixture).
StoreFactory = Callable[..., MetadataStore]

F = TypeVar("F", bound=Callable[..., Any])

#: The marker :func:`requires` sets; the store suite skips a test whose marker names a capability
#: the backend lacks.
REQUIRES_MARKER = "coordkit_requires"
#: Every skip of an inapplicable test starts with this, so the summary can count them.
NOT_APPLICABLE = "not applicable"


class Capability(enum.StrEnum):
    """What a backend offers; tests that need one it lacks are reported as not applicable."""

    #: From :class:`~coordkit.store.StoreCharacteristics`: nodes that die with their session.
    EPHEMERAL_NODES = "ephemeral_nodes"
    #: From the characteristics: ZooKeeper's sequential names (ten digits, never reused).
    SEQUENTIAL_NODES = "sequential_nodes"
    #: From the characteristics: acknowledged writes survive a server crash (needs ``restart``).
    DURABLE = "durable"
    #: From the characteristics: sessions of other processes see the same tree and its watches
    #: (the URL from ``new_url`` must open in a child process through ``store_for``).
    SHARED_ACROSS_PROCESSES = "shared_across_processes"
    #: From the characteristics: ``watch_tree``, every change below a path in commit order.
    ORDERED_CHANGE_FEED = "ordered_change_feed"
    #: From the characteristics: the feed replays from a past position, each event with the state
    #: its own change wrote at the position it was committed at.
    CHANGE_FEED_HISTORY = "change_feed_history"
    #: From the characteristics: sessions reaching the server through another network path (as
    #: another machine would: :meth:`StoreBackend.another_path`) share the tree, its sessions and
    #: watches, and one path failing leaves the others working.
    MULTI_HOST = "multi_host"
    #: The backend implements ``expire(store)``: end a session server-side on demand.
    EXPIRE_SESSION = "expire_session"
    #: The backend implements ``disconnect(store)`` and ``reconnect(store)``.
    CUT_CONNECTION = "cut_connection"
    #: The backend implements ``restart()``: kill the server as a crash would and start it again.
    RESTART_SERVER = "restart_server"
    #: The backend implements ``advance_clock(seconds)``: sessions time out on a clock it moves.
    ADVANCE_CLOCK = "advance_clock"


#: Capabilities a store declares in its characteristics.
CHARACTERISTIC_CAPABILITIES = (
    Capability.EPHEMERAL_NODES,
    Capability.SEQUENTIAL_NODES,
    Capability.DURABLE,
    Capability.SHARED_ACROSS_PROCESSES,
    Capability.ORDERED_CHANGE_FEED,
    Capability.CHANGE_FEED_HISTORY,
    Capability.MULTI_HOST,
)


def requires(*capabilities: Capability) -> Callable[[F], F]:
    """Mark a test as needing every one of ``capabilities``.

    On a class, every test method the class itself defines is marked (not the class: suites are
    combined by inheritance, and a class's marks would reach every test of the combination).
    """
    unknown = [c for c in capabilities if not isinstance(c, Capability)]
    if unknown:
        raise TypeError(f"requires() takes Capability members, got {unknown!r}")
    marker = getattr(pytest.mark, REQUIRES_MARKER)(*capabilities)

    def apply(target: F) -> F:
        if isinstance(target, type):
            for name, member in list(vars(target).items()):
                if name.startswith("test") and callable(member):
                    setattr(target, name, marker(member))
            return target
        return marker(target)  # type: ignore[no-any-return]

    return apply


class StoreBackend:
    """A source of isolated stores for the store suite. Subclass it and implement :meth:`new_url`;
    implement any fault hook the store supports (each one declares a :class:`Capability`).

    The suite never branches on the backend: what a test needs, it asks for with
    :func:`requires`, and a backend lacking it gets the test reported as not applicable.
    """

    #: Shown in skip reasons and the summary.
    name: str = "store"

    # -- required
    def new_url(self) -> str:
        """A URL for a fresh, empty namespace (every test gets its own)."""
        raise NotImplementedError(f"{type(self).__name__} must implement new_url()")

    def open(self, url: str, **options: Any) -> MetadataStore:
        """Open a session on ``url`` (default: the store registered for the URL's scheme)."""
        return get_plugin_manager().store_for(url, **options)

    # -- fault hooks: implementing one declares its capability
    def expire(self, store: MetadataStore) -> None:
        """Expire ``store``'s session on the server side, as a timeout would (its ephemeral nodes
        go, the owner sees ``LOST`` and then a new session)."""
        raise NotImplementedError

    def disconnect(self, store: MetadataStore) -> None:
        """Cut ``store``'s connection without ending its session (it goes ``SUSPENDED``)."""
        raise NotImplementedError

    def reconnect(self, store: MetadataStore) -> None:
        """Let ``store`` reconnect to its session after :meth:`disconnect`."""
        raise NotImplementedError

    def restart(self) -> None:
        """Kill the server as a crash would (no clean shutdown) and start it on the same data."""
        raise NotImplementedError

    def advance_clock(self, seconds: float) -> None:
        """Move the clock the backend's sessions time out by forward by ``seconds``."""
        raise NotImplementedError

    def another_path(self, url: str) -> NetworkPath:
        """Another network path to ``url``'s store, as a second machine would reach it (for
        ``multi_host`` stores; the caller closes it). Default: a loopback proxy per ``host:port``
        of the URL."""
        return proxied_path(url)

    def close(self) -> None:
        """Release whatever the backend started (servers, proxies, directories)."""

    # -- what it offers
    def capabilities(self) -> frozenset[Capability]:
        """The store's declared characteristics plus the hooks this class implements.

        Opens one store on a fresh namespace to read its characteristics. Override to declare
        otherwise (for instance to turn off a hook that exists but does not work everywhere).
        """
        offered: set[Capability] = set()
        store = self.open(self.new_url())
        try:
            traits = store.characteristics
            offered.update(c for c in CHARACTERISTIC_CAPABILITIES if getattr(traits, c.value))
        finally:
            if store.state is not SessionState.CLOSED:
                store.close()
        hooks = {
            Capability.EXPIRE_SESSION: ("expire",),
            Capability.CUT_CONNECTION: ("disconnect", "reconnect"),
            Capability.RESTART_SERVER: ("restart",),
            Capability.ADVANCE_CLOCK: ("advance_clock",),
        }
        for capability, methods in hooks.items():
            if all(_overrides(type(self), method) for method in methods):
                offered.add(capability)
        return frozenset(offered)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _overrides(cls: type, method: str) -> bool:
    return getattr(cls, method) is not getattr(StoreBackend, method)


#: Placeholders a URL given with ``--coordkit-store`` may contain.
ID_PLACEHOLDER = "{id}"
TMP_PLACEHOLDER = "{tmp}"


def check_url_template(template: str) -> None:
    """Raise ``ValueError`` naming the option unless ``template`` has the ``{id}`` placeholder."""
    if ID_PLACEHOLDER not in template:
        raise ValueError(
            f"--coordkit-store {template!r}: the URL needs {ID_PLACEHOLDER} where the suite puts "
            "a fresh name per test (each test needs an empty namespace), e.g. 'memory://{id}', "
            "'zookeeper://127.0.0.1:2181/scratch/{id}', 'sqlite:///{tmp}/{id}.db'"
        )


class UrlBackend(StoreBackend):
    """The backend behind ``--coordkit-store URL``: ``{id}`` in the URL becomes a fresh name per
    test (``{tmp}`` a directory of the run); no fault hooks, so the tests that need one are
    reported as not applicable."""

    def __init__(self, template: str, tmp: Path | None = None):
        check_url_template(template)
        if TMP_PLACEHOLDER in template and tmp is None:
            raise ValueError(f"--coordkit-store {template!r}: no directory for {TMP_PLACEHOLDER}")
        self.template = template
        self.tmp = tmp
        self._run = uuid.uuid4().hex[:8]
        self._ids = itertools.count(1)
        self.scheme = template.split("://", 1)[0] if "://" in template else template
        self.name = self.scheme

    def new_url(self) -> str:
        url = self.template.replace(ID_PLACEHOLDER, f"kit-{self._run}-{next(self._ids)}")
        if self.tmp is not None:
            url = url.replace(TMP_PLACEHOLDER, str(self.tmp))
        return url

    def __repr__(self) -> str:
        return f"<UrlBackend {self.scheme}://...>"


#: Backend → its capabilities, computed once per backend (opening a store to read them).
_capability_cache: dict[int, tuple[StoreBackend, frozenset[Capability]]] = {}


def capabilities_of(backend: StoreBackend) -> frozenset[Capability]:
    cached = _capability_cache.get(id(backend))
    if cached is None or cached[0] is not backend:
        cached = _capability_cache[id(backend)] = (backend, backend.capabilities())
    return cached[1]


def skip_unless_applicable(backend: StoreBackend, item: pytest.Item) -> None:
    """Skip ``item`` as not applicable when it requires a capability ``backend`` lacks."""
    needed = {c for marker in item.iter_markers(REQUIRES_MARKER) for c in marker.args}
    missing = sorted(needed - capabilities_of(backend))
    if missing:
        pytest.skip(f"{NOT_APPLICABLE}: {backend.name} declares no {', '.join(missing)}")
