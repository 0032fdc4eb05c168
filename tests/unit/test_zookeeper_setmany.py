"""The ZooKeeper store's ``set_many`` on the wire: the bytes kazoo would send, replies read right."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st
from kazoo.exceptions import BadVersionError, RolledBackError
from kazoo.protocol import serialization as proto

from coordkit.store import StatColumns
from coordkit_zookeeper.setmany import SetManyRequest, encode

_names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/"), min_size=1, max_size=12
)
_paths = st.lists(_names, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))
_versions = st.integers(-1, 2**31 - 1)
_checks = st.lists(st.tuples(_paths, _versions), max_size=3)
_sets = st.lists(st.tuples(_paths, st.binary(max_size=64), _versions), max_size=20)
_stats = st.tuples(
    *(st.integers(0, 2**63 - 1) for _ in range(4)),
    *(st.integers(0, 2**31 - 1) for _ in range(3)),
    st.integers(0, 2**63 - 1),
    *(st.integers(0, 2**31 - 1) for _ in range(2)),
    st.integers(0, 2**63 - 1),
)
_HEADER = struct.Struct(">iBi")
_STAT = struct.Struct(">qqqqiiiqiiq")


def _request(checks: list[tuple[str, int]], sets: list[tuple[str, bytes, int]]) -> SetManyRequest:
    return SetManyRequest(
        [p for p, _ in checks],
        [v for _, v in checks],
        [p for p, _, _ in sets],
        [d for _, d, _ in sets],
        [v for _, _, v in sets],
    )


@given(_checks, _sets)
def test_the_request_is_byte_for_byte_kazoos_multi_of_checks_and_sets(
    checks: list[tuple[str, int]], sets: list[tuple[str, bytes, int]]
) -> None:
    ops = [proto.CheckVersion(p, v) for p, v in checks]
    ops += [proto.SetData(p, d, v) for p, d, v in sets]
    assert _request(checks, sets).serialize() == bytes(proto.Transaction(ops).serialize())
    assert encode([], [], [], [], []) == bytes(proto.Transaction([]).serialize())


@given(_checks, st.lists(_stats, max_size=20), st.integers(0, 16))
def test_a_successful_reply_becomes_stat_columns(
    checks: list[tuple[str, int]], stats: list[tuple[int, ...]], offset: int
) -> None:
    sets = [(f"/n{i}", b"v", 0) for i in range(len(stats))]
    reply = b"\0" * offset + b"".join(_HEADER.pack(proto.CheckVersion.type, 0, 0) for _ in checks)
    reply += b"".join(_HEADER.pack(proto.SetData.type, 0, 0) + _STAT.pack(*s) for s in stats)
    reply += _HEADER.pack(-1, 1, -1)
    (columns,) = _request(checks, sets).deserialize(reply, offset)
    assert isinstance(columns, StatColumns)
    kazoo = proto.Transaction.deserialize(reply, offset)[len(checks) :]
    order = ["czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion"]
    order += ["ephemeral_owner", "data_length", "num_children", "pzxid"]  # ZooKeeper's order
    assert [tuple(getattr(s, name) for name in order) for s in columns] == [tuple(z) for z in kazoo]


def test_a_failed_reply_is_read_as_kazoo_reads_it() -> None:
    # ZooKeeper answers a failed multi with an error result per op: the failing one's code,
    # the others rolled back (0) or not run (-2, runtime inconsistency).
    reply = _HEADER.pack(-1, 0, 0) + struct.pack(">i", 0)
    reply += _HEADER.pack(-1, 0, -103) + struct.pack(">i", -103)
    reply += _HEADER.pack(-1, 1, -1)
    results = _request([("/epoch", 3)], [("/a", b"x", 7)]).deserialize(reply, 0)
    assert isinstance(results[0], RolledBackError)
    assert isinstance(results[1], BadVersionError)


@given(_sets)
def test_bytes_like_data_encodes_as_its_bytes(sets: list[tuple[str, bytes, int]]) -> None:
    paths = [p for p, _, _ in sets]
    versions = [v for _, _, v in sets]
    as_bytes = encode([], [], paths, [d for _, d, _ in sets], versions)
    assert encode([], [], paths, [bytearray(d) for _, d, _ in sets], versions) == as_bytes
    assert encode([], [], paths, [memoryview(d) for _, d, _ in sets], versions) == as_bytes
