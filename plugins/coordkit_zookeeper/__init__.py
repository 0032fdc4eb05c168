"""The ZooKeeper metadata store, on kazoo (extra ``zookeeper``).

``zookeeper://[user:pass@]host:port[,host:port...][/chroot][?session_timeout=S&tls=true&ca=...]``

* Several hosts form the ensemble the client may connect to; the chroot (created if missing) is
  the store's root, so one ensemble can hold many independent trees. Opened with
  ``read_only=True`` nothing is created: a missing chroot is a ``NoNodeError`` ("no such chroot
  /x (nothing was created)") and every write raises ``ReadOnlyError``.
* ``user:pass@`` authenticates with ZooKeeper's ``digest`` scheme; nodes the store creates get the
  ACL "this user may do anything, anyone may read", so other credentials cannot change them
  (they get ``NoAuthError``). Credentials never appear in logs, errors or ``repr``.
* ``tls=true`` connects over TLS (to the servers' ``secureClientPort``); ``ca=``, ``cert=``,
  ``key=``, ``verify=``, ``check_hostname=`` configure it. See :mod:`coordkit_zookeeper.config`
  for every parameter and open option.

kazoo is imported only when a ``zookeeper://`` store is opened.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from coordkit import hookimpl
from coordkit.errors import MissingDependencyError
from coordkit.store.urls import StoreURL

if TYPE_CHECKING:
    from coordkit_zookeeper.store import ZooKeeperStore

__all__ = ["open_zookeeper_store"]

INSTALL_HINT = "pip install coordkit[zookeeper]"


def open_zookeeper_store(
    url: StoreURL, *, read_only: bool = False, **options: Any
) -> ZooKeeperStore:
    """Open ``zookeeper://...``; options: ``session_timeout``, ``connect_timeout``,
    ``request_timeout`` (seconds, overriding the URL's), ``keyfile_password`` (TLS key),
    ``set_acl`` (Kafka's ``zookeeper.set.acl``, overriding the URL's), ``read_only`` (create
    nothing, refuse writes)."""
    from coordkit_zookeeper.config import ZooKeeperConfig

    config = ZooKeeperConfig.from_url(url, **options)
    try:
        import kazoo  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            f"the ZooKeeper store needs the kazoo client library: {INSTALL_HINT}"
        ) from exc
    # kazoo imports pure-sasl only if it can, and without it would retry the login for ever.
    if config.sasl and importlib.util.find_spec("puresasl") is None:
        raise MissingDependencyError(
            f"SASL to ZooKeeper needs the pure-sasl library: {INSTALL_HINT}"
        )
    from coordkit_zookeeper.store import ZooKeeperStore

    return ZooKeeperStore(url, config, read_only=read_only)


@hookimpl
def coordkit_register_stores(register: Any) -> None:
    register("zookeeper", open_zookeeper_store)
