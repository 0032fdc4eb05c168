"""The kit's second network path to a store (multi-host tests): the URL it hands out."""

from __future__ import annotations

import socket

import pytest

from coordkit.store.urls import StoreURL
from coordkit.testing.servers.paths import proxied_path


def test_the_path_rewrites_only_the_hosts_and_reaches_the_same_server() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        url = f"redis://user:s%40cret@127.0.0.1:{port}/3?session_timeout=4"
        path = proxied_path(url)
        try:
            parsed, original = StoreURL.parse(path.url), StoreURL.parse(url)
            assert (parsed.username, parsed.password) == ("user", "s@cret")
            assert (parsed.path, parsed.query) == (original.path, original.query)
            [(host, proxy_port)] = parsed.hosts
            assert proxy_port != port
            with socket.create_connection((host, proxy_port), timeout=5) as client:
                accepted, _ = server.accept()
                with accepted:
                    client.sendall(b"ping")
                    assert accepted.recv(4) == b"ping"
            assert "s@cret" not in repr(path)
        finally:
            path.close()


def test_every_host_of_an_ensemble_gets_its_own_proxy() -> None:
    path = proxied_path("zookeeper://127.0.0.1:2181,127.0.0.1:2182/chroot")
    try:
        hosts = StoreURL.parse(path.url).hosts
        assert len(hosts) == 2
        assert len({port for _host, port in hosts}) == 2
        assert path.url.endswith("/chroot")
    finally:
        path.close()


def test_a_url_without_host_and_port_says_how_to_offer_another_path() -> None:
    with pytest.raises(ValueError, match="names no host:port") as info:
        proxied_path("memory://name")
    assert "StoreBackend.another_path" in str(info.value)
