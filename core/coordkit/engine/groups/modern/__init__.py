"""Kafka 4's consumer group protocol (KIP-848) on the engine's group coordinator; the modules
mirror Kafka's ``org.apache.kafka.coordinator.group.modern.consumer``:

* :mod:`.member` — ``ConsumerGroupMember`` and its states;
* :mod:`.reconciliation` — ``CurrentAssignmentBuilder``: a member's next step towards its target;
* :mod:`.group` — ``ConsumerGroup``: epochs, members, targets, who owns each partition;
* :mod:`.heartbeat` — ConsumerGroupHeartbeat (``GroupMetadataManager``'s consumer-group part);
* :mod:`.target` — ``TargetAssignmentBuilder``: the server-side assignor computing the target;
* :mod:`.service` — the entry points the coordinator composes: lookup, locking, persistence,
  ConsumerGroupDescribe, offset-commit checks, deadlines;
* :mod:`.records`, :mod:`.persistence` — what is stored, and writing only what changed;
* :mod:`.topics` — the topics image the assignor reads; :mod:`.java_order` — Java's hash
  iteration orders, where Kafka's answers depend on them.
"""
