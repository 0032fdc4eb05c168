"""Consumer offset storage strategies: ``zookeeper`` (seed 001's ``/consumers/G/offsets/T/P``) and
``offsets-topic`` (Kafka's ``__consumer_offsets`` model)."""

from __future__ import annotations
