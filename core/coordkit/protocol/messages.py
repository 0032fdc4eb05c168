"""The message classes and compiled codecs of every api coordkit speaks, built from the definitions.

``messages.MetadataRequest``, ``messages.FetchResponse``, ``messages.RequestHeader`` are the
generated classes; nested structs hang off their message class under Kafka's names
(``MetadataRequest.MetadataRequestTopic``). :func:`plan` compiles an (message, version) pair on
first use and keeps it.
"""

from __future__ import annotations

from functools import cache

from attrs import field, frozen

from coordkit.protocol.compile_decode import Decoder, compile_decoder
from coordkit.protocol.compile_encode import Encoder, compile_encoder
from coordkit.protocol.errors import ProtocolError
from coordkit.protocol.schema import API_NAMES, MessageSpec, Versions, load_definition
from coordkit.protocol.structs import Struct, make_classes


@frozen
class ApiSchema:
    """One api: its key, the versions both sides define, and its request and response specs."""

    name: str
    key: int
    versions: Versions
    request: MessageSpec = field(repr=False)
    response: MessageSpec = field(repr=False)


@frozen
class Plan:
    """The compiled codec of one message at one version."""

    spec: MessageSpec
    version: int
    encode: Encoder
    decode: Decoder


_SPECS: dict[str, MessageSpec] = {}
_CLASSES: dict[str, type[Struct]] = {}
#: Every struct class of each message, by Kafka's struct name.
_STRUCT_CLASSES: dict[str, dict[str, type[Struct]]] = {}
APIS: dict[str, ApiSchema] = {}
APIS_BY_KEY: dict[int, ApiSchema] = {}


def _load() -> None:
    names = [f"{api}{kind}" for api in API_NAMES for kind in ("Request", "Response")]
    for name in [*names, "RequestHeader", "ResponseHeader"]:
        spec = load_definition(name)
        _SPECS[name] = spec
        classes = make_classes(spec.structs)
        for struct_name, cls in classes.items():
            if struct_name != name:
                # Every struct of a message hangs off the message class, as in Kafka's *Data.
                cls.__qualname__ = f"{name}.{struct_name}"
                setattr(classes[name], struct_name, cls)
        _CLASSES[name] = classes[name]
        _STRUCT_CLASSES[name] = classes
    for api in API_NAMES:
        request, response = _SPECS[f"{api}Request"], _SPECS[f"{api}Response"]
        if request.api_key is None or request.api_key != response.api_key:
            raise ProtocolError(f"{api}: request and response disagree on the api key")
        if request.valid_versions != response.valid_versions:
            raise ProtocolError(f"{api}: request and response disagree on the versions")
        schema = ApiSchema(api, request.api_key, request.valid_versions, request, response)
        APIS[api] = schema
        APIS_BY_KEY[schema.key] = schema


_load()


def message_class(name: str) -> type[Struct]:
    """The class of message ``name`` (``MetadataRequest``, ``RequestHeader``)."""
    try:
        return _CLASSES[name]
    except KeyError:
        raise AttributeError(f"no Kafka message named {name!r}") from None


def message_spec(name: str) -> MessageSpec:
    return _SPECS[name]


def __getattr__(name: str) -> type[Struct]:
    return message_class(name)


@cache
def plan(name: str, version: int) -> Plan:
    """Compile message ``name`` at ``version`` (once; later calls return the same plan)."""
    spec = _SPECS[name]
    if version not in spec.valid_versions:
        raise ProtocolError(
            f"unsupported version (valid: {spec.valid_versions})",
            api=spec.api,
            version=version,
            kind=spec.kind,
        )
    classes = _STRUCT_CLASSES[name]
    encoder, _ = compile_encoder(spec, version, classes)
    decoder, _ = compile_decoder(spec, version, classes)
    return Plan(spec, version, encoder, decoder)


def compile_all() -> int:
    """Compile every api at every version up front (a broker's warm-up); returns the count."""
    count = 0
    for schema in APIS.values():
        for version in range(schema.versions.lo, schema.versions.hi + 1):
            plan(schema.request.name, version)
            plan(schema.response.name, version)
            count += 2
    for header in ("RequestHeader", "ResponseHeader"):
        spec = _SPECS[header]
        for version in range(spec.valid_versions.lo, spec.valid_versions.hi + 1):
            plan(header, version)
            count += 1
    return count
