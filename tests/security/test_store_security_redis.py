"""The Redis store's own security under ``coordkit serve`` (#36 item 4): a password (``redis://:pw@``)
and TLS (``rediss://`` with the CA) keep working with one broker per process, a real client
producing and consuming in a group; the password reaches each process through ``$COORDKIT_STORE``,
never its arguments, output or log (at DEBUG); a wrong password stops ``coordkit serve`` at start
with one line and exit status 2."""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from coordkit.serve import KafkaServer
from coordkit.testing.servers.redis_server import RedisServer
from coordkit.testing.servers.zookeeper_server import make_tls_files
from harness.docs import code_block, page
from security.test_store_security_zookeeper import Served

PASSWORD = "redis-Zq-secret-5e0c"
TLS_PASSWORD = "rediss-Zq-secret-9a2d"
RECORDS = 30


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with RedisServer(password=PASSWORD) as server:
        yield server


@pytest.fixture(scope="module")
def tls_redis() -> Iterator[RedisServer]:
    with RedisServer(password=TLS_PASSWORD, tls=True) as server:
        yield server


def _round_trip(bootstrap: str, topic: str, replicas: int) -> list[bytes]:
    """A topic of three partitions, records produced with acks=all, read back in a group."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, replicas)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(topic, f"r{i}".encode(), partition=i % 3)
    assert producer.flush(60) == 0
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })  # fmt: skip
    consumer.subscribe([topic])
    read: list[bytes] = []
    try:
        for _ in range(120):
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                read.append(message.value())
            if len(read) == RECORDS:
                consumer.commit(asynchronous=False)
                break
    finally:
        consumer.close()
    return sorted(read)


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def _cluster_of_processes(url: str, brokers: int, secret: str) -> None:
    topic = f"t-{uuid.uuid4().hex[:6]}"
    processes = [
        Served(url, "group.initial.rebalance.delay.ms=0", broker_id=b) for b in range(brokers)
    ]
    logs = ""
    try:
        for served in processes:
            assert secret not in _cmdline(served.process.pid)
        bootstrap = ",".join(s.bootstrap for s in processes)
        read = _round_trip(bootstrap, topic, brokers)
        assert read == sorted(f"r{i}".encode() for i in range(RECORDS))
    finally:
        for served in processes:
            logs += served.stop()
    assert "listening on" in logs
    assert secret not in logs


def test_broker_processes_on_a_password_protected_redis(redis: RedisServer) -> None:
    _cluster_of_processes(redis.url(password=PASSWORD, prefix=uuid.uuid4().hex), 3, PASSWORD)


def test_broker_processes_on_redis_over_tls(tls_redis: RedisServer) -> None:
    url = tls_redis.url(password=TLS_PASSWORD, prefix=uuid.uuid4().hex)
    assert url.startswith("rediss://")
    _cluster_of_processes(url, 2, TLS_PASSWORD)


def _serve_once(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from coordkit.cli import main; main()", "serve", "--port", "0",
         *args],
        env=dict(os.environ, COORDKIT_STORE=url), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("server", "secret", "words"),
    [
        ("redis", PASSWORD, "the server refused the credentials"),
        ("tls_redis", TLS_PASSWORD, "the server refused the credentials"),
        ("redis", None, "the server requires authentication"),
    ],
)
def test_a_wrong_or_missing_password_stops_serve_in_one_line(
    request: pytest.FixtureRequest, server: str, secret: str | None, words: str
) -> None:
    store: RedisServer = request.getfixturevalue(server)
    wrong = None if secret is None else "not-" + secret
    result = _serve_once(store.url(password=wrong, prefix=uuid.uuid4().hex))
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ")
    assert words in line
    assert line.startswith("error: Redis at redis")  # which store, its URL redacted
    for hidden in (PASSWORD, TLS_PASSWORD):
        assert hidden not in result.stderr
        assert hidden[4:] not in result.stderr  # no part of the wrong one either


@pytest.mark.parametrize("ca", ["other", "missing"])
def test_tls_with_a_ca_that_does_not_sign_the_server_stops_serve_in_one_line(
    tls_redis: RedisServer, tmp_path: Path, ca: str
) -> None:
    """A CA that did not sign the server's certificate, or no such file: one line, exit 2."""
    other = make_tls_files(tmp_path).other_ca if ca == "other" else tmp_path / "no-such-ca.pem"
    url = tls_redis.url(password=TLS_PASSWORD, prefix="x", ssl_ca_certs=str(other))
    result = _serve_once(url)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ")
    assert TLS_PASSWORD not in result.stderr


def test_a_password_on_the_command_line_is_warned_about(redis: RedisServer) -> None:
    url = redis.url(password=PASSWORD, prefix=uuid.uuid4().hex)
    process = subprocess.Popen(
        [sys.executable, "-c", "from coordkit.cli import main; main()", "serve", "--port", "0",
         "--store", url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if k != "COORDKIT_STORE"},
    )  # fmt: skip
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("store "):
            break
    process.send_signal(2)
    out, err = process.communicate(timeout=60)
    assert "warning: the --store URL holds a password" in err
    assert "$COORDKIT_STORE" in err
    assert PASSWORD not in out + err


def test_no_password_in_any_log_record_at_debug(
    redis: RedisServer, tls_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for store, secret in ((redis, PASSWORD), (tls_redis, TLS_PASSWORD)):
        url = store.url(password=secret, prefix=uuid.uuid4().hex)
        server = KafkaServer(url, [0], port=0)
        with server.running():
            thread = threading.Thread(target=lambda s=server: asyncio.run(s.serve()))
            thread.start()
            try:
                bootstrap = str(server.addresses[0])
                assert _round_trip(bootstrap, f"t-{uuid.uuid4().hex[:6]}", 1)
            finally:
                server.stop()
                thread.join(timeout=30)
    assert any(r.levelno == logging.DEBUG for r in caplog.records)
    assert "redis" in caplog.text
    for secret in (PASSWORD, TLS_PASSWORD):
        assert secret not in caplog.text


def test_the_docs_session_runs(tls_redis: RedisServer, tmp_path: Path) -> None:
    """docs/serve.md's Redis session as written: its URL with the server's port, password and CA
    exchanged for the page's, a broker on it producing and consuming."""
    export, command = code_block(page("serve.md"), "Redis: password and TLS", "sh").text.split(
        "\n"
    )[:2]
    url = shlex.split(export.removeprefix("export "))[0].split("=", 1)[1]
    assert url.startswith("rediss://:redis-secret@127.0.0.1:6380/0?ssl_ca_certs=ca.pem")
    (tmp_path / "ca.pem").write_text(Path(tls_redis.tls_files["ca_cert"]).read_text())
    url = url.replace("redis-secret", TLS_PASSWORD).replace("6380", str(tls_redis.port))
    words = shlex.split(command)
    assert words == ["coordkit", "serve", "--broker-id", "1", "--port", "9092"]
    served = Served(url, broker_id=1, cwd=tmp_path)
    try:
        assert _round_trip(served.bootstrap, "docs", 1) == sorted(
            f"r{i}".encode() for i in range(RECORDS)
        )
    finally:
        log = served.stop()
    assert TLS_PASSWORD not in log
