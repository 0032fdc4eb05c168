"""Kafka's own model, as coordkit reproduces it: topics, partitions and their states
(:mod:`.model`), the znode layout Kafka writes in ZooKeeper (:mod:`.layout`), and which broker
coordinates a group (:mod:`.coordinators`)."""
