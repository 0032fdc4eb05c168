"""Kafka's admin tools in Kafka's vocabulary, on any store, without starting brokers:
``coordkit topics`` (kafka-topics.sh), ``coordkit reassign`` (kafka-reassign-partitions.sh),
``coordkit elect-preferred`` (kafka-preferred-replica-election.sh) and ``coordkit brokers``; and
``coordkit delete-node`` (zkCli's ``delete``), to clear a node the cluster cannot read.

They read and write Kafka's znode layout directly, as the ZooKeeper-era tools did with
``--zookeeper``: a running cluster's controller acts on what they write. Commands that only look
open the store read-only; commands that write check their input against a read-only session first
and open a writing one only when everything holds.
"""

from coordkit.cli.admin.brokers import brokers_command
from coordkit.cli.admin.delete_node import delete_node_command
from coordkit.cli.admin.reassign import elect_preferred_command, reassign_command
from coordkit.cli.admin.topics import topics_group

__all__ = [
    "brokers_command",
    "delete_node_command",
    "elect_preferred_command",
    "reassign_command",
    "topics_group",
]
