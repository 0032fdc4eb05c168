"""Loaded into each ``coordkit serve`` process of the process-chaos suite before coordkit itself:
routes the process's TCP connections to other brokers' listeners through the test's proxies, so
that the test can cut two brokers apart while clients still reach both.

``coordkit serve`` registers the address it listens on and has no separate advertised address (a
proxy in front of a broker cannot be what the others are told to connect to), so the redirection
is on the connecting side: :func:`install` wraps :func:`socket.create_connection` (the
controller's requests to brokers, ControlledShutdown) and :func:`asyncio.open_connection`
(followers' fetches) so that a connection to ``host:port`` listed in the JSON file named by
``COORDKIT_CHAOS_PEER_ROUTES`` goes to the proxy listed for it instead. Any other connection (the
store's, for one) goes where it was meant to. coordkit's code is not touched; the file is read at
each connection, so the test may move a route when a broker comes back on another port.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from typing import Any

ROUTES_VARIABLE = "COORDKIT_CHAOS_PEER_ROUTES"


def _route(host: Any, port: Any) -> tuple[Any, Any]:
    path = os.environ.get(ROUTES_VARIABLE)
    if not path:
        return host, port
    try:
        with open(path) as routes_file:
            routes = json.load(routes_file)
    except (OSError, ValueError):
        return host, port
    target = routes.get(f"{host}:{port}")
    if target is None:
        return host, port
    to_host, to_port = target.rsplit(":", 1)
    return to_host, int(to_port)


def install() -> None:
    create_connection = socket.create_connection
    open_connection = asyncio.open_connection

    def routed_create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        return create_connection(_route(address[0], address[1]), *args, **kwargs)

    async def routed_open_connection(host: Any = None, port: Any = None, **kwargs: Any) -> Any:
        host, port = _route(host, port)
        return await open_connection(host, port, **kwargs)

    socket.create_connection = routed_create_connection  # type: ignore[assignment]
    asyncio.open_connection = routed_open_connection  # type: ignore[assignment]
