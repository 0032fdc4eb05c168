"""Checks of what an offset storage factory is given, with errors naming the storage and option."""

from __future__ import annotations

from collections.abc import Mapping

from coordkit.errors import UnsupportedError
from coordkit.store import MetadataStore

#: option name → (type, minimum) for integers, or (type, None).
OptionSpec = Mapping[str, tuple[type, int | None]]


def check_store(storage: str, store: object) -> MetadataStore:
    if not isinstance(store, MetadataStore):
        raise TypeError(
            f"offset storage {storage!r}: expected a MetadataStore session, got {type(store).__name__}"
        )
    return store


def check_durability(storage: str, store: MetadataStore, options: dict[str, object]) -> None:
    """Pop ``require_durable`` from ``options``; when true, refuse a backend that does not keep
    an acknowledged write across a server crash (``characteristics.durable``), because then an
    acknowledged commit could still be lost."""
    required = options.pop("require_durable", False)
    if not isinstance(required, bool):
        raise TypeError(
            f"offset storage {storage!r}: option 'require_durable' must be bool, got {required!r}"
        )
    if required:
        try:
            store.require("durable")
        except UnsupportedError as exc:
            raise UnsupportedError(
                f"offset storage {storage!r} with require_durable=True: {exc}"
            ) from None


def check_options(
    storage: str, options: Mapping[str, object], spec: OptionSpec
) -> dict[str, object]:
    unknown = sorted(set(options) - set(spec))
    if unknown:
        raise TypeError(
            f"offset storage {storage!r}: unknown option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(spec))}"
        )
    for name, value in options.items():
        kind, minimum = spec[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TypeError(
                f"offset storage {storage!r}: option {name!r} must be {kind.__name__}, got {value!r}"
            )
        if minimum is not None and isinstance(value, int) and value < minimum:
            raise ValueError(
                f"offset storage {storage!r}: option {name!r} must be >= {minimum}, got {value}"
            )
    return dict(options)


def int_option(options: Mapping[str, object], name: str, default: int) -> int:
    value = options.get(name, default)
    assert isinstance(value, int)  # check_options has checked it
    return value


def str_option(options: Mapping[str, object], name: str, default: str) -> str:
    value = options.get(name, default)
    assert isinstance(value, str)  # check_options has checked it
    return value
