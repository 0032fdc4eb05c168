"""``coordkit serve``: engine brokers that real Kafka clients talk to over Kafka's protocol.

* :mod:`~coordkit.serve.server` — the process: sockets, brokers registering their real
  addresses, the event loop;
* :mod:`~coordkit.serve.listener` — one broker's listener and connections (asyncio);
* :mod:`~coordkit.serve.dispatch` — the apis and versions served, ApiVersions, dispatch;
* :mod:`~coordkit.serve.metadata` — Metadata (from the store's registrations and partition states);
* :mod:`~coordkit.serve.topics` — CreateTopics, DeleteTopics (through the engine's topic
  administration); :mod:`~coordkit.serve.partitions` — CreatePartitions;
* :mod:`~coordkit.serve.follower` — what a process learns of other processes' brokers (one
  broker per process, ``--broker-id``);
* :mod:`~coordkit.serve.produce` — Produce; :mod:`~coordkit.serve.fetch` — Fetch, ListOffsets;
  :mod:`~coordkit.serve.leader_epochs` — OffsetForLeaderEpoch;
* :mod:`~coordkit.serve.log` — a partition replica's log of record batches;
  :mod:`~coordkit.serve.logdir` — the logs on disk (``--data-dir``), a Kafka broker's log
  directory; :mod:`~coordkit.serve.kafka_files` — its small files as Kafka writes them;
* :mod:`~coordkit.serve.replicas` — followers copying their leaders' logs, the high watermark;
* :mod:`~coordkit.serve.producers` — InitProducerId and idempotent producers' sequence checks;
* :mod:`~coordkit.serve.groups` — the consumer-group apis on the engine's group coordinator.
"""

from coordkit.serve.context import BrokerContext, ServeSettings
from coordkit.serve.dispatch import SUPPORTED
from coordkit.serve.server import Address, KafkaServer, ServeError

__all__ = ["SUPPORTED", "Address", "BrokerContext", "KafkaServer", "ServeError", "ServeSettings"]
