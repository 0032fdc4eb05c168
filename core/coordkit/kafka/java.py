"""Java's own functions that Kafka's behaviour depends on (a group's coordinator partition, the
order of a config node's keys), computed as the JVM computes them."""

from __future__ import annotations

from collections.abc import Mapping

from coordkit.strategies.assignment import java_string_key


def java_string_hashcode(value: str) -> int:
    """Java's ``String.hashCode()`` of ``value``: a signed 32-bit int over UTF-16 code units."""
    h = 0
    units = java_string_key(value)
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


# -- java.util.Properties ------------------------------------------------------------------------
# Kafka 3.9 writes a config node (``/config/topics/T``, ``/config/brokers/N``, ``/config/users/U``,
# client quotas) as ``{"version":1,"config":{...}}``, Jackson iterating a ``Properties``: since
# Java 9 a ``ConcurrentHashMap``, whose keys come out by bucket (the spread of ``String.hashCode``
# masked by the table size: 16 buckets up to 11 keys, doubled each time three quarters are used),
# in insertion order within a bucket. Writing that order makes coordkit's nodes Kafka's bytes.

#: ``new Properties()``'s map: ``new ConcurrentHashMap<>(8)``, a table of 16 buckets.
_INITIAL_TABLE = 16


def properties_order(config: Mapping[str, str]) -> dict[str, str]:
    """``config`` in the order Kafka 3.9 writes it as a ``Properties`` (keys inserted in
    ``config``'s order)."""
    table = _INITIAL_TABLE
    while len(config) >= table * 3 // 4:
        table *= 2
    keys = list(config)

    def bucket(key: str) -> int:
        h = java_string_hashcode(key) & 0xFFFFFFFF
        return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (table - 1)

    return {k: config[k] for k in sorted(keys, key=lambda k: (bucket(k), keys.index(k)))}
