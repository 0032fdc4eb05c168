"""The loopback TCP proxy lives in the kit (coordkit.testing.servers.proxy); tests import it here."""

from __future__ import annotations

from coordkit.testing.servers.proxy import TCPProxy

__all__ = ["TCPProxy"]
