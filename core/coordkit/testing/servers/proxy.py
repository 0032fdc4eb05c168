"""A loopback TCP proxy that can cut a client off from its server without ending its session.

Clients connect to ``proxy.port``; :meth:`TCPProxy.cut` drops every open connection and closes each
new one at once until :meth:`TCPProxy.restore`. Used for "connection loss without expiry" faults.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading


class TCPProxy:
    def __init__(self, target_host: str, target_port: int, listen_host: str = "127.0.0.1"):
        self.target = (target_host, target_port)
        self._server = socket.create_server((listen_host, 0), reuse_port=False)
        self._server.settimeout(0.2)
        self.host = listen_host
        self.port: int = self._server.getsockname()[1]
        self._cut = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._thread = threading.Thread(
            target=self._accept_loop, name=f"proxy-{self.port}", daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def cut(self) -> None:
        """Drop every connection and refuse new ones (accepted then closed) until :meth:`restore`."""
        self._cut.set()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    s.close()

    def restore(self) -> None:
        self._cut.clear()

    @property
    def is_cut(self) -> bool:
        return self._cut.is_set()

    def close(self) -> None:
        self._closed.set()
        self.cut()
        with contextlib.suppress(OSError):
            self._server.close()
        self._thread.join(timeout=5)

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        sockets = [a, b]
        try:
            while not self._cut.is_set():
                readable, _, _ = select.select(sockets, [], [], 0.2)
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
        except (OSError, ValueError):
            return
        finally:
            for s in sockets:
                with contextlib.suppress(OSError):
                    s.close()
            with self._lock:
                if (a, b) in self._pairs:
                    self._pairs.remove((a, b))
