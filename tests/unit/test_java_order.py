"""coordkit's Java hash orders against Java's own HashMap and HashSet, run by the JDK.

Kafka's coordinator hands its assignors maps keyed by member id and lists names from sets; where
coordkit must give Kafka's exact answer it iterates in the same order, so the orders are checked
here against a real JVM (``java HashOrder.java``, the JDK's single-file launch).
"""

from __future__ import annotations

import random
import shutil
import subprocess
import uuid
from pathlib import Path

from coordkit.engine.groups.modern.java_order import (
    java_hash_map_order,
    java_hash_set_order,
    java_string_hash,
)

PROGRAM = Path(__file__).parents[1] / "harness" / "java_order" / "HashOrder.java"


def _java_orders(key_sets: list[list[str]]) -> list[tuple[list[str], list[str]]]:
    """Each set's HashMap order and HashSet order, from one JVM."""
    java = shutil.which("java")
    assert java, (
        "java not found: install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless)"
    )
    stdin = "".join("".join(f"{k}\n" for k in keys) + "<end>\n" for keys in key_sets)
    out = subprocess.run(
        [java, "-Xmx64m", str(PROGRAM)], input=stdin, capture_output=True, text=True,
        timeout=120, check=True,
    ).stdout  # fmt: skip
    orders = []
    for block in out.split("<end>\n")[:-1]:
        lines = block.splitlines()
        split = lines.index("set")
        orders.append((lines[1:split], lines[split + 1 :]))
    return orders


def _keys(rng: random.Random, count: int) -> list[str]:
    # Member ids as clients make them (UUIDs, Kafka's base64 ids) and short names (topics).
    kinds = [
        lambda: str(uuid.UUID(int=rng.getrandbits(128))),
        lambda: f"topic-{rng.randrange(10**6)}",
        lambda: "".join(rng.choice("abcXYZ019-_é") for _ in range(rng.randrange(1, 12))),
    ]
    return list(dict.fromkeys(rng.choice(kinds)() for _ in range(count)))


def test_string_hash_is_javas() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("polygenelubricants") == -(2**31)  # a known Java collision value


COUNTS = [1, 5, 12, 13, 24, 25, 100, 1000]


def test_orders_are_the_jvms() -> None:
    key_sets = [_keys(random.Random(count), count) for count in COUNTS]
    for keys, (map_order, set_order) in zip(key_sets, _java_orders(key_sets), strict=True):
        assert java_hash_map_order(keys) == map_order, len(keys)
        assert java_hash_set_order(keys) == set_order, len(keys)
