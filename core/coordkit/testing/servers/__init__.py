"""Private servers for running stores under test: ZooKeeper (standalone or an ensemble) and Redis
on free loopback ports, and a TCP proxy that cuts a client off without ending its session; and
real Apache Kafka clusters (ZooKeeper mode on 3.9, KRaft on 4) with Kafka's own command-line tools,
for the tests that take Kafka as the oracle.

Only processes and sockets: no ZooKeeper, Redis or Kafka client is imported here (readiness is
ZooKeeper's ``srvr`` four-letter word, Redis's ``PING`` and Kafka's Metadata over a raw socket). A
missing binary or Kafka jar cache raises an error naming the package to install or the command to
run; a test should fail with it, never skip.
"""

from __future__ import annotations

from coordkit.testing.servers.kafka_metadata import BrokerInfo, ClusterMetadata, fetch_metadata
from coordkit.testing.servers.kafka_server import KafkaCluster, KafkaNode, KafkaStartError
from coordkit.testing.servers.kafka_tools import (
    KAFKA_KRAFT_VERSION,
    KAFKA_ZOOKEEPER_MODE_VERSION,
    KafkaUnavailableError,
    kafka_home,
    kafka_tool,
    tool_main_class,
)
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
    "KAFKA_KRAFT_VERSION",
    "KAFKA_ZOOKEEPER_MODE_VERSION",
    "BrokerInfo",
    "ClusterMetadata",
    "KafkaCluster",
    "KafkaNode",
    "KafkaStartError",
    "KafkaUnavailableError",
    "RedisServer",
    "RedisServerMissingError",
    "StandaloneZooKeeper",
    "TCPProxy",
    "ZooKeeperEnsemble",
    "ZooKeeperServer",
    "ZooKeeperUnavailableError",
    "ensemble",
    "fetch_metadata",
    "free_port",
    "kafka_home",
    "kafka_tool",
    "standalone",
    "tool_main_class",
]
