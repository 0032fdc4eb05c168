"""Kafka's command-line tools, kcat and confluent-kafka's AdminClient, unchanged, against
``coordkit serve`` (on each store) and Kafka 4.4 side by side (issue #35 item 4)."""
