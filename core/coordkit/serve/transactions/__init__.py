"""The transaction coordinator of ``coordkit serve`` (issue 38), in Kafka's parts:

* :mod:`.coordinator` — :class:`~.coordinator.TransactionCoordinator`, one per broker: the
  transactional ids it coordinates, their producer ids and epochs, and each transaction from its
  first partition to its markers;
* :mod:`.state_manager` — :class:`~.state_manager.TransactionStateManager`: which broker
  coordinates an id (its ``__transaction_state`` partition's leader) and the ids' state in the
  store;
* :mod:`.metadata` — :class:`~.metadata.TransactionMetadata`, an id's state, and its store layout;
* :mod:`.markers` — :class:`~.markers.TransactionMarkerChannelManager`: WriteTxnMarkers to the
  partition leaders;
* :mod:`.config` — the coordinator's broker configs.

Its apis are :mod:`coordkit.serve.apis.transactions`'. This package imports nothing at its top,
so that :mod:`coordkit.serve.context` may import :mod:`.config`.
"""
