"""``coordkit serve``'s refusals (one ``error:`` line, exit status 2, nothing started) and the
registration its brokers write."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading

import pytest

from coordkit.kafka import layout
from coordkit.serve import KafkaServer


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from coordkit.cli import main; main()", "serve", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--brokers", "0"], "--brokers '0'"),
        (["--brokers", "1e3"], "--brokers '1e3'"),
        (["--port", "70000"], "--port '70000'"),
        (["--port", "65535", "--brokers", "2"], "--port 65535"),
        (["--placement", "nowhere"], "--placement 'nowhere'"),
        (["--group-coordinator", "nowhere"], "--group-coordinator 'nowhere'"),
        (["--bogus"], "--bogus"),
        (["--store", "nosuch://x"], "nosuch"),
        (["--host", "no such host.invalid", "--port", "0"], "--host"),
    ],
)
def test_a_bad_option_is_one_line_and_status_2(args: list[str], named: str) -> None:
    result = _serve(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert named in lines[0]


def test_a_port_in_use_is_refused_before_the_store_is_touched() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _serve("--port", str(port))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
    )


def test_brokers_register_where_they_listen() -> None:
    server = KafkaServer("memory://serve-registration", [0, 1], port=0)
    with server.running():
        thread = threading.Thread(target=lambda: asyncio.run(server.serve()))
        thread.start()
        try:
            store = server.cluster.admin_store
            for broker_id, address in server.addresses.items():
                data, _ = store.get(layout.broker_path(broker_id))
                info = layout.BROKER.decode(data)
                assert (info.host, info.port) == ("127.0.0.1", address.port)
                assert info.endpoints == (f"PLAINTEXT://127.0.0.1:{address.port}",)
                assert info.version == 5  # Kafka 3.9's registration
                # Something really listens there.
                socket.create_connection(("127.0.0.1", address.port), timeout=10).close()
        finally:
            server.stop()
            thread.join(timeout=30)
    assert not thread.is_alive()
