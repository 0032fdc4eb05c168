"""coordkit's assignors inside real Kafka consumers.

Any registered coordkit assignor (``coordkit plugins`` lists them: ``sticky``,
``cooperative-sticky``, ``uniform``, ``weighted-sticky``, ``range``, ...) becomes a partition
assignor of a Python Kafka client, usable against any Kafka cluster (or ``coordkit serve``):

* :mod:`coordkit.clients.kafka_python`: ``assignor(name)`` returns a kafka-python assignor
  *class* (kafka-python makes one instance per consumer)::

      from kafka import KafkaConsumer
      from coordkit.clients.kafka_python import assignor

      consumer = KafkaConsumer(
          "orders",
          bootstrap_servers="localhost:9092",
          group_id="billing",
          partition_assignment_strategy=[assignor("sticky")],
      )

* :mod:`coordkit.clients.aiokafka`: ``assignor(name)`` returns an aiokafka assignor *object*;
  call it once per consumer.

The consumer that the coordinator picks as group leader runs the assignor; every member keeps
its owned partitions and generation and sends them in Kafka's formats (:mod:`.consumer_protocol`,
:mod:`.group`). The protocol name is the coordkit name, and all members of a group must offer it.

The client libraries are imported only when an adapter is used; without them this package still
imports, and ``assignor()`` raises :class:`~coordkit.errors.MissingDependencyError` naming the
package to install.
"""
