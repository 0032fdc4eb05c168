"""The one error the Kafka protocol codec raises for bad bytes, bad values or unknown apis."""

from __future__ import annotations

from coordkit.errors import CoordkitError


class ProtocolError(CoordkitError, ValueError):
    """A frame or value the codec refuses, with where it went wrong.

    The message reads ``Metadata v12 request: topics[3].name: string length 70000 exceeds the 4
    bytes left``. The parts are kept as attributes so a broker can still answer (it needs the
    ``correlation_id`` and the api to pick an error response).

    :param reason: what was wrong, without the location.
    :param api: the api name (``Metadata``), or None when the api key itself is unknown.
    :param api_key: the numeric api key, when read.
    :param version: the api version, when read.
    :param kind: ``request``, ``response`` or ``header``.
    :param path: the field path (``topics[3].name``), empty for the message as a whole.
    :param correlation_id: the request's correlation id, when the header was read.
    """

    def __init__(
        self,
        reason: str,
        *,
        api: str | None = None,
        api_key: int | None = None,
        version: int | None = None,
        kind: str | None = None,
        path: str = "",
        correlation_id: int | None = None,
    ) -> None:
        self.reason = reason
        self.api = api
        self.api_key = api_key
        self.version = version
        self.kind = kind
        self.path = path
        self.correlation_id = correlation_id
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = []
        if self.api is not None:
            where.append(self.api)
        elif self.api_key is not None:
            where.append(f"api key {self.api_key}")
        if self.version is not None:
            where.append(f"v{self.version}")
        if self.kind is not None:
            where.append(self.kind)
        prefix = " ".join(where)
        parts = [p for p in (prefix, self.path) if p]
        return ": ".join([*parts, self.reason])

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild,
            (
                self.reason,
                self.api,
                self.api_key,
                self.version,
                self.kind,
                self.path,
                self.correlation_id,
            ),
        )


def _rebuild(
    reason: str,
    api: str | None,
    api_key: int | None,
    version: int | None,
    kind: str | None,
    path: str,
    correlation_id: int | None,
) -> ProtocolError:
    return ProtocolError(
        reason,
        api=api,
        api_key=api_key,
        version=version,
        kind=kind,
        path=path,
        correlation_id=correlation_id,
    )
