"""Kafka's admin apis that tools and AdminClients call on ``coordkit serve`` (issue #35 item 2):

* :mod:`.cluster` — DescribeCluster;
* :mod:`.log_dirs` — DescribeLogDirs;
* :mod:`.records` — DeleteRecords;
* :mod:`.elections` — ElectLeaders (preferred and unclean);
* :mod:`.reassignments` — AlterPartitionReassignments, ListPartitionReassignments;
* :mod:`.producers` — DescribeProducers;
* :mod:`.topic_partitions` — DescribeTopicPartitions.

DeleteGroups and OffsetDelete are the group apis' (:mod:`coordkit.serve.apis.groups`).
:data:`ADMIN_APIS` is what the dispatcher serves: api name → (lowest, highest version, handler).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from coordkit.protocol import Request
from coordkit.serve.apis.admin import (
    cluster,
    elections,
    log_dirs,
    producers,
    reassignments,
    records,
    topic_partitions,
)
from coordkit.serve.context import BrokerContext

AdminHandler = Callable[[BrokerContext, Request], Awaitable[Any]]

ADMIN_APIS: dict[str, tuple[int, int, AdminHandler]] = {
    "DescribeCluster": (*cluster.VERSIONS, cluster.handle_describe_cluster),
    "DescribeLogDirs": (*log_dirs.VERSIONS, log_dirs.handle_describe_log_dirs),
    "DeleteRecords": (*records.VERSIONS, records.handle_delete_records),
    "ElectLeaders": (*elections.VERSIONS, elections.handle_elect_leaders),
    "AlterPartitionReassignments": (
        *reassignments.ALTER_VERSIONS,
        reassignments.handle_alter_partition_reassignments,
    ),
    "ListPartitionReassignments": (
        *reassignments.LIST_VERSIONS,
        reassignments.handle_list_partition_reassignments,
    ),
    "DescribeProducers": (*producers.VERSIONS, producers.handle_describe_producers),
    "DescribeTopicPartitions": (
        *topic_partitions.VERSIONS,
        topic_partitions.handle_describe_topic_partitions,
    ),
}

__all__ = ["ADMIN_APIS"]
