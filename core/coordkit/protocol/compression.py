"""The compression codecs of Kafka's record batches (attributes bits 0-2).

``none`` and ``gzip`` always work (gzip is in the standard library). ``snappy`` (python-snappy,
Kafka's xerial framing), ``lz4`` (the ``lz4`` package, LZ4 frames) and ``zstd`` (``zstandard``)
work when their library is importable; otherwise encoding or decoding such a batch fails with a
:class:`ProtocolError` naming the codec and the package to install. Decompression stops at a size
limit, so a small compressed batch cannot expand without bound.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from importlib import import_module
from types import ModuleType

from coordkit.protocol.errors import ProtocolError

#: Codec names by Kafka's id.
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CODEC_IDS = {name: codec_id for codec_id, name in CODECS.items()}
#: The module each optional codec needs, and the distribution that provides it.
OPTIONAL = {"snappy": ("snappy", "python-snappy"), "lz4": ("lz4.frame", "lz4"),
            "zstd": ("zstandard", "zstandard")}  # fmt: skip
#: Largest decompressed records section accepted unless the caller says otherwise.
DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def codec_module(name: str) -> ModuleType:
    """The library of optional codec ``name``, or a clear error when it is not installed."""
    module, distribution = OPTIONAL[name]
    try:
        return import_module(module)
    except ImportError:
        raise ProtocolError(
            f"compression codec {name} needs the {distribution!r} package, which is not installed"
            f" (pip install {distribution})",
            kind="record batch",
        ) from None


def available(name: str) -> bool:
    """Whether codec ``name`` can be used here."""
    if name in ("none", "gzip"):
        return True
    try:
        codec_module(name)
    except ProtocolError:
        return False
    return True


def compress(codec: int, data: bytes) -> bytes:
    name = _name(codec)
    if name == "none":
        return data
    if name == "gzip":
        return gzip.compress(data, compresslevel=6)
    module = codec_module(name)
    if name == "snappy":
        out = bytearray(_XERIAL_HEADER)
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = module.compress(data[start : start + _XERIAL_BLOCK])
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if name == "lz4":
        return bytes(module.compress(data))
    return bytes(module.ZstdCompressor().compress(data))


def decompress(codec: int, data: bytes, limit: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Decompress a records section, refusing more than ``limit`` bytes of output."""
    name = _name(codec)
    if name == "none":
        return data
    try:
        out = _decompress(name, data, limit)
    except ProtocolError:
        raise
    except Exception as e:  # each library raises its own error types for corrupt input
        raise ProtocolError(f"{name} data is corrupt: {e}", kind="record batch") from None
    if len(out) > limit:
        raise ProtocolError(f"{name} data expands beyond {limit} bytes", kind="record batch")
    return out


def _decompress(name: str, data: bytes, limit: int) -> bytes:
    if name == "gzip":
        out = bytearray()
        rest = data
        while rest:  # Java's GZIPInputStream reads concatenated members too
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += inflater.decompress(rest, limit + 1 - len(out))
            if len(out) > limit:
                break
            if not inflater.eof:
                raise ProtocolError("gzip data is truncated", kind="record batch")
            rest = inflater.unused_data
        return bytes(out)
    module = codec_module(name)
    if name == "snappy":
        return _snappy(module, data, limit)
    if name == "lz4":
        inflater = module.LZ4FrameDecompressor()
        out = inflater.decompress(data, max_length=limit + 1)
        return bytes(out)
    reader = module.ZstdDecompressor().stream_reader(data)
    return bytes(reader.read(limit + 1))


def _snappy_length(block: bytes) -> int:
    """The uncompressed length a raw snappy block starts with (a little-endian varint)."""
    value = shift = 0
    for b in block[:5]:
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value
        shift += 7
    raise ProtocolError("snappy block has no valid length preamble", kind="record batch")


def _snappy(module: ModuleType, data: bytes, limit: int) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        if _snappy_length(data) > limit:
            raise ProtocolError(f"snappy data expands beyond {limit} bytes", kind="record batch")
        return bytes(module.decompress(data))
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        if pos + 4 > len(data):
            raise ProtocolError("snappy block length truncated", kind="record batch")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or size > len(data) - pos:
            raise ProtocolError(
                f"snappy block of {size} bytes exceeds the data", kind="record batch"
            )
        block = data[pos : pos + size]
        if len(out) + _snappy_length(block) > limit:
            raise ProtocolError(f"snappy data expands beyond {limit} bytes", kind="record batch")
        out += module.decompress(block)
        pos += size
    return bytes(out)


def _name(codec: int) -> str:
    try:
        return CODECS[codec]
    except KeyError:
        raise ProtocolError(f"unknown compression codec id {codec}", kind="record batch") from None
