"""The api handlers of ``coordkit serve``, one module per api family, as Kafka's ``KafkaApis``
dispatches them (:mod:`coordkit.serve.dispatch` maps each api key and version to its handler):

* :mod:`~.metadata` — Metadata; :mod:`~.topics` — CreateTopics, DeleteTopics;
  :mod:`~.partitions` — CreatePartitions;
* :mod:`~.produce` — Produce; :mod:`~.fetch` — Fetch, ListOffsets;
  :mod:`~.leader_epochs` — OffsetForLeaderEpoch; :mod:`~.init_producer_id` — InitProducerId;
* :mod:`~.groups` — the consumer-group apis on the engine's group coordinator.

A handler reads and writes through its broker's :class:`~coordkit.serve.context.BrokerContext`:
the engine broker for the control plane, :mod:`coordkit.serve.dataplane` for records. A new api
family (configs, the KIP-848 consumer group heartbeat, inter-broker requests) is a new module here.
"""
