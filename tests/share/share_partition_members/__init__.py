"""Share-group members in processes of their own for ``tests/share/test_share_partitions_clients.py``:
confluent-kafka's ``ShareConsumer`` (``share_member.py``) and Kafka's Java ``KafkaShareConsumer``
(``ShareMember.java``), both printing the JSON lines :class:`~.members.ShareMember` reads."""
