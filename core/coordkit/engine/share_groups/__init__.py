"""Share groups (KIP-932) on the engine: the share-group coordinator's part, modules named after
Kafka's ``org.apache.kafka.coordinator.group.modern.share``.

* :mod:`.events` — ``ShareGroupListener``: what the share-partition side is told (members
  leaving, groups deleted).
"""
