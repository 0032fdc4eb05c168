"""The controller, split by responsibility as Kafka's ``KafkaController`` is.

* :mod:`.controller` — :class:`Controller`, one broker's term, composing the parts below;
* :mod:`.events` — the level-triggered event loop (marks, passes, retries);
* :mod:`.context` — what the controller knows, read from the store;
* :mod:`.partition_state` — leader elections and fenced, batched state writes;
* :mod:`.replica_state` — dead replicas out of ISRs, ISR change notifications;
* :mod:`.deletion` — topic deletion;
* :mod:`.reassignment` — partition reassignment (``/admin/reassign_partitions``);
* :mod:`.shutdown` — controlled shutdown;
* :mod:`.preferred` — preferred-replica elections and the automatic leader rebalance.
"""

from coordkit.engine.controller.controller import Controller

__all__ = ["Controller"]
