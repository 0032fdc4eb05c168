"""Share partitions (KIP-932): the share-partition leader's side of share groups.

Kafka's ``SharePartition`` and ``SharePartitionManager`` reproduced over coordkit's logs:

* :mod:`.in_flight`: record states, acknowledgement types and the state of one in-flight record
  (Kafka's ``RecordState``, ``AcknowledgeType``, ``InFlightState``);
* :mod:`.share_partition`: one share partition of one share group — its start offset, its
  in-flight records, acquisition with locks that time out, acknowledgement, the delivery-count
  limit (a pure model: time is handed in);
* :mod:`.persister`: the share-partition state persisted through the metadata store (what Kafka
  keeps in ``__share_group_state``), so that a new leader resumes it;
* :mod:`.share_session`: Kafka's ``ShareSessionCache`` (a session per group and member, epochs);
* :mod:`.partition_manager`: a broker's share partitions, their initialization (persisted state,
  or ``share.auto.offset.reset``), lock timers and the release of departed members' records.
"""
