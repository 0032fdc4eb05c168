"""The conformance kit: coordkit's own contract suites, for checking third-party plugins.

``coordkit.testing`` is a pytest plugin, registered through the ``pytest11`` entry point whenever
coordkit is installed; ``pip install 'coordkit[testing]'`` brings its dependencies (pytest,
hypothesis). coordkit runs its built-in stores, assignors, elections and partitioners through the
same classes, so a plugin that passes is held to exactly what the built-ins are.

Stores
======
With nothing but a URL (``{id}`` becomes a fresh name per test, so every test starts from an empty
namespace; ``{tmp}`` a temporary directory of the run)::

    pytest -p coordkit.testing --coordkit-store 'sqlite:///{tmp}/{id}.db'

With fault hooks, declare a backend in ``conftest.py`` and subclass the suite in a test module::

    # conftest.py
    import itertools
    import pytest
    from coordkit.testing import StoreBackend

    class SqliteBackend(StoreBackend):
        name = "sqlite"

        def __init__(self, directory):
            self.directory, self.ids = directory, itertools.count()

        def new_url(self) -> str:                 # required: a URL of a fresh, empty namespace
            return f"sqlite:///{self.directory}/{next(self.ids)}.db"

        def expire(self, store) -> None:          # optional hooks; implementing one declares
            ...                                   # its capability (see Capability)

    @pytest.fixture(scope="session")
    def coordkit_store_backend(tmp_path_factory):
        backend = SqliteBackend(tmp_path_factory.mktemp("sqlite"))
        yield backend
        backend.close()

    # test_conformance.py
    from coordkit.testing.store import StoreTests

    class TestSqliteStore(StoreTests):
        pass

:class:`StoreBackend` hooks (all optional but ``new_url``): ``open(url, **options)`` (default:
``coordkit.plugins.get_plugin_manager().store_for``), ``expire(store)`` (end the session on the
server side, as a timeout would), ``disconnect(store)`` / ``reconnect(store)`` (cut the connection
without ending the session, then let it reconnect), ``restart()`` (kill the server as a crash would
and start it again on the same data), ``advance_clock(seconds)`` (move the clock that times
sessions out), ``close()``. A test needing a :class:`Capability` the backend lacks is skipped as
``not applicable: <backend> declares no <capability>`` and counted in the run's closing
``coordkit conformance`` summary; it is never passed silently. Capabilities come from the
stores' own :class:`~coordkit.store.StoreCharacteristics` (``ephemeral_nodes``,
``sequential_nodes``, ``durable``, ``shared_across_processes``, ``ordered_change_feed``,
``change_feed_history``) and from the hooks implemented;
override :meth:`StoreBackend.capabilities` to declare otherwise. The durability test needs
``durable`` and ``restart()`` (a store without a server restarts by dropping what a crash of every
client would drop); the cross-process tests open ``new_url()`` in child interpreters through
``store_for``, so the store's plugin must be installed, not just registered in the test process.

The suite is split by concept (:mod:`coordkit.testing.store`): ``StoreNodeTests``,
``StoreSessionTests``, ``StoreEphemeralTests``, ``StoreSequentialTests``, ``StoreWatchTests``,
``StoreFeedTests`` (``watch_tree``: commit order, positions, resuming, RESYNC after a gap),
``StoreTransactionTests``, ``StoreBulkTests``, ``StoreModelTests`` (a hypothesis state machine
against a dict model of ZooKeeper), ``StoreProcessTests``, ``StoreDurabilityTests``,
``StoreClockTests``; ``StoreTests`` combines them all.

Assignors, elections, partitioners
==================================
By registered name (repeatable options)::

    pytest -p coordkit.testing --coordkit-assignor rendezvous
    pytest -p coordkit.testing --coordkit-election my-election --coordkit-partitioner my-hash

or by subclassing :class:`~coordkit.testing.assignors.AssignorTests`,
:class:`~coordkit.testing.elections.PartitionElectionTests` or
:class:`~coordkit.testing.partitioners.PartitionerTests` and overriding the fixture
``coordkit_assignor`` / ``coordkit_partition_election`` / ``coordkit_partitioner`` (the
partitioner fixture returns a factory: ``factory(options)`` builds a fresh partitioner).

What an assignor promises beyond the always-checked properties it declares as class attributes:
``sticky = True`` (when a member leaves, only its partitions move), ``count_balanced = False``
(opt out of "counts within one for identical subscriptions"); ``RebalanceProtocol.COOPERATIVE``
in ``protocols`` adds the cooperative safety checks. A partitioner declares ``keys_hash = False``
when keys do not place records and ``chooses_partitions = False`` when records must name their
partition.

Share-partition assignors (KIP-932) have their suite too: subclass
:class:`~coordkit.testing.share_assignors.ShareAssignorTests` and override its
``share_assignor`` fixture (``balanced`` and ``sticky`` class attributes declare the rest).

Other options: ``--coordkit-timeout SECONDS`` bounds every wait for an asynchronous outcome
(default 20; a bound on a failing test, never a timed assertion), ``--coordkit-examples N`` the
hypothesis examples per property (default 60), ``--coordkit-no-shrink`` reports a failing example
as found instead of shrinking it. ``-p coordkit.testing`` is harmless when the entry point loaded
the plugin already, and loads it when ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` is set.

Servers
=======
:mod:`coordkit.testing.servers` starts private ZooKeeper and Redis servers on free loopback ports
(``StandaloneZooKeeper``, ``ZooKeeperEnsemble``, ``RedisServer``), and ``TCPProxy`` cuts a
client's connection without ending its session. A missing binary is an error naming the package
to install (``apt-get install zookeeper`` / ``redis-server``), never a skip.
"""

from __future__ import annotations

from coordkit.testing.backends import Capability, StoreBackend, UrlBackend, requires
from coordkit.testing.waiting import wait_for

__all__ = ["Capability", "StoreBackend", "UrlBackend", "requires", "wait_for"]

#: ``-p coordkit.testing`` loads the plugin module (once: it is registered under its own name).
pytest_plugins = ["coordkit.testing.plugin"]
