"""Private servers for running stores under test: ZooKeeper (standalone or an ensemble) and Redis
on free loopback ports, and a TCP proxy that cuts a client off without ending its session.

Only processes and sockets: no ZooKeeper or Redis client is imported here (readiness is
ZooKeeper's ``srvr`` four-letter word and Redis's ``PING`` over a raw socket). A missing binary
raises an error naming the package to install; a test should fail with it, never skip.
"""

from __future__ import annotations

from coordkit.testing.servers.ports import free_port
from coordkit.testing.servers.proxy import TCPProxy
from coordkit.testing.servers.redis_server import RedisServer, RedisServerMissingError
from coordkit.testing.servers.zookeeper_server import (
    StandaloneZooKeeper,
    ZooKeeperEnsemble,
    ZooKeeperServer,
    ZooKeeperUnavailableError,
    ensemble,
    standalone,
)

__all__ = [
    "RedisServer",
    "RedisServerMissingError",
    "StandaloneZooKeeper",
    "TCPProxy",
    "ZooKeeperEnsemble",
    "ZooKeeperServer",
    "ZooKeeperUnavailableError",
    "ensemble",
    "free_port",
    "standalone",
]
