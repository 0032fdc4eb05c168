"""The one place coordkit parses JSON it did not write itself: store values, input files, reports.

Untrusted JSON is bounded before the parser sees it: its size, its nesting depth (CPython's parser
recurses, so a 100,000-deep document would otherwise end in ``RecursionError``), its encoding
(UTF-8 only, a byte order mark refused) and its numbers (no ``NaN``/``Infinity``, no integer wider
than :data:`MAX_INT_DIGITS` digits). Every refusal is a :class:`JSONTextError` whose message says
what was wrong, so callers only add where (path, field, file).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

#: Deepest nesting accepted. Kafka's nodes nest three levels; assignor input four.
MAX_DEPTH = 64
#: Longest integer literal accepted (an int of 10**4300 digits already takes Python seconds).
MAX_INT_DIGITS = 100
#: Largest document accepted by default (ZooKeeper's node limit is about 1 MiB).
MAX_BYTES = 64 * 1024 * 1024


class JSONTextError(ValueError):
    """A JSON document that coordkit refuses; the message names the reason (not the place)."""


def _reject_constant(name: str) -> Any:
    raise JSONTextError(f"{name} is not a JSON number")


def _parse_int(text: str) -> int:
    digits = len(text) - (text[0] == "-")
    if digits > MAX_INT_DIGITS:
        raise JSONTextError(f"an integer of {digits:,} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONTextError(f"the number {text[:40]} is out of range")
    return value


def _depth_exceeds(data: bytes, limit: int) -> bool:
    # Cheap C-level counts first: a document with few brackets cannot be deep.
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    return _scan_depth(data, limit)


def _scan_depth(data: bytes, limit: int) -> bool:
    depth = 0
    in_string = False
    index = 0
    end = len(data)
    while index < end:
        byte = data[index]
        if in_string:
            if byte == 0x5C:  # backslash: skip the escaped byte
                index += 2
                continue
            if byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
        index += 1
    return False


def loads(
    data: bytes | str,
    *,
    max_depth: int = MAX_DEPTH,
    max_bytes: int = MAX_BYTES,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> Any:
    """Parse ``data`` as JSON within the bounds above.

    ``object_pairs_hook`` builds each object from its ``(key, value)`` pairs in document order (to
    see keys given twice, which ``json`` silently resolves to the last).

    :raises JSONTextError: not UTF-8, too large, too deep, not JSON, or a number out of range.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise JSONTextError(f"{len(raw):,} bytes of JSON (at most {max_bytes:,})")
    if raw.startswith(b"\xef\xbb\xbf"):
        raise JSONTextError("starts with a byte order mark")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONTextError(f"not UTF-8 (byte {exc.start} is {raw[exc.start]:#04x})") from None
    if _depth_exceeds(raw, max_depth):
        raise JSONTextError(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_reject_constant,
            object_pairs_hook=object_pairs_hook,
        )
    except JSONTextError:
        raise
    except RecursionError:
        raise JSONTextError(f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as exc:
        raise JSONTextError(
            f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError as exc:
        raise JSONTextError(f"not valid JSON ({exc})") from None


def kind_of(value: object) -> str:
    """How a message names a decoded JSON value's kind: ``null``, ``a boolean``, ``a number``,
    ``a string``, ``a list`` or ``an object``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"
