"""How a config api refuses one resource: Kafka's error code and message."""

from __future__ import annotations


class RefusedError(Exception):
    """A resource Kafka refuses with ``code`` and this message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
