"""Share groups (KIP-932) on the engine: the share-group coordinator's part, modules named after
Kafka's ``org.apache.kafka.coordinator.group.modern.share``.

* :mod:`.group` — ``ShareGroup`` and ``ShareGroupMember``: epochs, members, targets;
* :mod:`.heartbeat` — ShareGroupHeartbeat (``GroupMetadataManager``'s share-group part): joins,
  epochs, fencing, session expiry and the target assignment from the share assignor;
* :mod:`.shard` — the share-group part of ``GroupCoordinatorShard``: lookup, locking, storing,
  ShareGroupDescribe, DeleteGroups, the sweep of ended sessions;
* :mod:`.records` — what a share group's node holds;
* :mod:`.protocol` — the requests and answers as plain values;
* :mod:`.events` — ``ShareGroupListener``: what the share-partition side is told (members
  leaving, groups deleted).
"""
