"""Kafka's own test cases (``kafka-vectors.json``).

The reference copy lives in ``../shared/reference`` beside the repository; ``tests/data`` holds a
copy so the suite also runs from a lone clone. ``COORDKIT_KAFKA_VECTORS`` overrides both. When the
shared file is present it wins, so cases added there are checked without touching the repo.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = (
    REPO.parent / "shared" / "reference" / "kafka-vectors.json",
    REPO / "tests" / "data" / "kafka-vectors.json",
)


def vectors_path() -> Path:
    override = os.environ.get("COORDKIT_KAFKA_VECTORS")
    if override:
        return Path(override)
    for candidate in CANDIDATES:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"kafka-vectors.json not found in {', '.join(map(str, CANDIDATES))}")


@functools.cache
def kafka_vectors() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(vectors_path().read_text())
    return data
