"""The data plane of ``coordkit serve``'s brokers: what holds and moves records, apart from the
api handlers that ask for it (:mod:`coordkit.serve.apis`).

* :mod:`~.log` — a partition replica's log of record batches, a broker's logs, the wake-ups of
  fetches waiting for records and of acks=all produces waiting for the high watermark;
* :mod:`~.logdir` — the logs on disk (``--data-dir``), a Kafka broker's log directory, and
  :mod:`~.kafka_files` — its small files as Kafka writes them;
* :mod:`~.producer_state` — producer ids and idempotent producers' sequence checks per partition;
* :mod:`~.replicas` — followers of this process copying their leaders' logs, the high watermark
  (Kafka's ``ReplicaManager``); :mod:`~.remote_replicas` — followers fetching from leaders in
  other processes over Kafka's protocol (``ReplicaFetcherThread``); :mod:`~.follower` — what a
  process learns of other processes' brokers.

Nothing here imports an api handler or the handlers' context: the data plane is typed against
what it needs of a broker (:class:`~.log.LocalBroker`).
"""
