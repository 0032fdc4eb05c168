"""Kafka's consumer protocol: the bytes a consumer group exchanges through the coordinator,
encoded and decoded with coordkit's generated codec — the one codec of them, for the clients'
assignors (:mod:`coordkit.clients`) and for ``coordkit serve``'s group coordinator alike.

* ``ConsumerProtocolSubscription`` (JoinGroup metadata, versions 0-3: owned partitions from v1,
  generation from v2, rack from v3) and ``ConsumerProtocolAssignment`` (SyncGroup assignment),
  from Kafka's own definitions vendored in :mod:`coordkit.protocol`. Both start with an int16
  version; a newer version is read with the newest layout known, trailing fields ignored, as
  Kafka's ``ConsumerProtocol`` does.
* The eager ``sticky`` assignor's user data, ``StickyAssignorUserData`` v1 (previous assignment
  and generation; v0 lacks the generation), laid out exactly as Java's ``StickyAssignor`` writes
  it: no version prefix. kafka-python 3.0's own sticky assignor prefixes an int16 version; that
  form is read too.
* The ``cooperative-sticky`` user data: the generation as one int32 (Java's
  ``CooperativeStickyAssignor``).

Everything here reads bytes another group member wrote, so every decoder either returns a checked
value or raises :class:`UserDataError`.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from attrs import field, frozen

from coordkit.protocol import ProtocolError
from coordkit.protocol import wire as _wire
from coordkit.protocol.compile_decode import Decoder, compile_decoder
from coordkit.protocol.compile_encode import Encoder, compile_encoder
from coordkit.protocol.schema import MessageSpec, load_definition, parse_definition
from coordkit.protocol.structs import Struct, make_classes

#: Kafka's "no generation" (``DEFAULT_GENERATION``).
NO_GENERATION = -1
SUBSCRIPTION_VERSIONS = range(0, 4)
ASSIGNMENT_VERSIONS = range(0, 4)

# Java's StickyAssignor declares this with hand-written Schema objects (STICKY_ASSIGNOR_USER_DATA_V0
# and _V1); written as a definition so the generated codec reads it with the same checks.
_STICKY_USER_DATA = """{
  "type": "data",
  "name": "StickyAssignorUserData",
  "validVersions": "0-1",
  "flexibleVersions": "none",
  "fields": [
    { "name": "PreviousAssignment", "type": "[]TopicPartition", "versions": "0+", "fields": [
        { "name": "Topic", "type": "string", "versions": "0+" },
        { "name": "Partitions", "type": "[]int32", "versions": "0+" }
    ]},
    { "name": "Generation", "type": "int32", "versions": "1+", "default": "-1" }
  ]
}"""

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class UserDataError(ValueError):
    """Bytes from a group member that no accepted layout reads."""


@frozen
class Subscription:
    """A decoded ``ConsumerProtocolSubscription``."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned: dict[str, tuple[int, ...]] = field(factory=dict)
    generation: int = NO_GENERATION
    rack: str | None = None
    version: int = 0


@frozen
class Assignment:
    """A decoded ``ConsumerProtocolAssignment``."""

    partitions: dict[str, tuple[int, ...]]
    user_data: bytes | None = None
    version: int = 0


@frozen
class Claim:
    """What a member says it owned, and in which generation."""

    owned: dict[str, tuple[int, ...]] = field(factory=dict)
    generation: int = NO_GENERATION


@frozen
class _Plan:
    cls: type[Struct]
    encode: Encoder
    decode: Decoder


@functools.cache
def _spec(name: str) -> MessageSpec:
    if name == "StickyAssignorUserData":
        return parse_definition("StickyAssignorUserData.json", _STICKY_USER_DATA)
    return load_definition(name)


@functools.cache
def _plan(name: str, version: int) -> _Plan:
    spec = _spec(name)
    classes = make_classes(spec.structs)
    encoder, _ = compile_encoder(spec, version, classes)
    decoder, _ = compile_decoder(spec, version, classes)
    return _Plan(classes[name], encoder, decoder)


def _encode(name: str, version: int, value: Struct) -> bytes:
    out = bytearray()
    try:
        _plan(name, version).encode(out, value)
    except _wire.Fail as e:
        raise ProtocolError(e.reason, path=f"{name} v{version} {e.path}".strip()) from None
    return bytes(out)


def _decode(name: str, version: int, data: bytes, pos: int, *, exact: bool) -> Any:
    try:
        value, end = _plan(name, version).decode(data, pos)
    except _wire.Fail as e:
        raise UserDataError(f"{name} v{version}: {e.path or 'message'}: {e.reason}") from None
    if exact and end != len(data):
        raise UserDataError(f"{name} v{version}: {len(data) - end} bytes left over")
    return value


def _topic_partitions(cls: type[Struct], owned: Mapping[str, Iterable[int]]) -> list[Struct]:
    return [cls(topic=t, partitions=sorted(ps)) for t, ps in sorted(owned.items()) if ps]


def _as_mapping(items: Iterable[Any], field_name: str) -> dict[str, tuple[int, ...]]:
    out: dict[str, list[int]] = {}
    for item in items:
        out.setdefault(item.topic, []).extend(getattr(item, field_name))
    return {t: tuple(ps) for t, ps in out.items()}


# -- ConsumerProtocolSubscription / ConsumerProtocolAssignment -----------------------------------


def encode_subscription(
    topics: Iterable[str],
    *,
    user_data: bytes | None = None,
    owned: Mapping[str, Iterable[int]] | None = None,
    generation: int = NO_GENERATION,
    rack: str | None = None,
    version: int = 0,
) -> bytes:
    """JoinGroup metadata bytes (fields the version lacks are left out, as Kafka does)."""
    if version not in SUBSCRIPTION_VERSIONS:
        raise ValueError(f"ConsumerProtocolSubscription has versions 0-3, not {version!r}")
    plan = _plan("ConsumerProtocolSubscription", version)
    value = plan.cls(
        topics=sorted(set(topics)),
        user_data=user_data,
        owned_partitions=_topic_partitions(plan.cls.TopicPartition, owned or {}),  # type: ignore[attr-defined]
        generation_id=generation,
        rack_id=rack,
    )
    return _INT16.pack(version) + _encode("ConsumerProtocolSubscription", version, value)


def _decode_versioned(name: str, data: bytes, newest: int, *, lenient: bool) -> tuple[int, Any]:
    """The version the bytes say and the value read with that version's layout (the newest known
    for a newer one); ``lenient``: bytes cut short after an earlier version's fields are read
    with that version's layout (a client that wrote fewer fields than its version has)."""
    if len(data) < 2:
        raise UserDataError(f"{name}: no version")
    (version,) = _INT16.unpack_from(data)
    if version < 0:
        raise UserDataError(f"{name}: negative version {version}")
    read = min(version, newest)
    try:
        return version, _decode(name, read, data, 2, exact=False)
    except UserDataError:
        if not lenient:
            raise
        for earlier in range(read - 1, -1, -1):
            try:
                return version, _decode(name, earlier, data, 2, exact=True)
            except UserDataError:
                continue
        raise


def decode_subscription(data: bytes, *, lenient: bool = False) -> Subscription:
    """Read JoinGroup metadata; raises :class:`UserDataError` for bytes no version reads
    (``lenient``: see :func:`_decode_versioned`)."""
    version, value = _decode_versioned(
        "ConsumerProtocolSubscription", bytes(data), SUBSCRIPTION_VERSIONS[-1], lenient=lenient
    )
    return Subscription(
        topics=tuple(value.topics),
        user_data=value.user_data,
        owned=_as_mapping(value.owned_partitions, "partitions"),
        generation=value.generation_id,
        rack=value.rack_id,
        version=version,
    )


def encode_assignment(
    partitions: Mapping[str, Iterable[int]], *, user_data: bytes | None = None, version: int = 0
) -> bytes:
    """SyncGroup assignment bytes."""
    if version not in ASSIGNMENT_VERSIONS:
        raise ValueError(f"ConsumerProtocolAssignment has versions 0-3, not {version!r}")
    plan = _plan("ConsumerProtocolAssignment", version)
    value = plan.cls(
        assigned_partitions=_topic_partitions(plan.cls.TopicPartition, partitions),  # type: ignore[attr-defined]
        user_data=user_data,
    )
    return _INT16.pack(version) + _encode("ConsumerProtocolAssignment", version, value)


def decode_assignment(data: bytes, *, lenient: bool = False) -> Assignment:
    """Read SyncGroup assignment bytes; raises :class:`UserDataError` for bytes no version reads
    (``lenient``: see :func:`_decode_versioned`)."""
    version, value = _decode_versioned(
        "ConsumerProtocolAssignment", bytes(data), ASSIGNMENT_VERSIONS[-1], lenient=lenient
    )
    return Assignment(
        partitions=_as_mapping(value.assigned_partitions, "partitions"),
        user_data=value.user_data,
        version=version,
    )


# -- the assignors' user data ----------------------------------------------------------------------


def encode_sticky_user_data(owned: Mapping[str, Iterable[int]], generation: int) -> bytes:
    """``StickyAssignorUserData`` v1 as Java's ``StickyAssignor`` writes it (no version prefix)."""
    plan = _plan("StickyAssignorUserData", 1)
    value = plan.cls(
        previous_assignment=_topic_partitions(plan.cls.TopicPartition, owned),  # type: ignore[attr-defined]
        generation=generation,
    )
    return _encode("StickyAssignorUserData", 1, value)


def decode_sticky_user_data(data: bytes) -> Claim:
    """A sticky member's previous assignment and generation.

    Tried in order, each required to read the bytes exactly: Java's v1, Java's v0 (no
    generation), then kafka-python 3.0's form with an int16 version prefix. Raises
    :class:`UserDataError` when none fits.
    """
    data = bytes(data)
    attempts: list[tuple[int, int]] = [(1, 0), (0, 0)]
    if len(data) >= 2:
        (prefix,) = _INT16.unpack_from(data)
        if prefix in (0, 1):
            attempts.append((prefix, 2))
    reasons = []
    for version, start in attempts:
        try:
            value = _decode("StickyAssignorUserData", version, data, start, exact=True)
        except UserDataError as e:
            reasons.append(str(e))
            continue
        generation = value.generation if version >= 1 else NO_GENERATION
        return Claim(_as_mapping(value.previous_assignment, "partitions"), generation)
    raise UserDataError(f"sticky user data ({len(data)} bytes) fits no layout: {reasons[0]}")


def encode_generation(generation: int) -> bytes:
    """One int32: Java's ``cooperative-sticky`` user data, and coordkit's assignment stamp."""
    return _INT32.pack(generation)


def decode_generation(data: bytes) -> int:
    if len(data) != _INT32.size:
        raise UserDataError(f"a generation is 4 bytes, got {len(data)}")
    value: int = _INT32.unpack(bytes(data))[0]
    return value
