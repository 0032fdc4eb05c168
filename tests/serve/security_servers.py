"""PEM files made with ``openssl`` and a ``coordkit serve`` with every kind of listener, for the
security tests (tests/serve/test_security.py; py311-security for the rest)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from serve.conftest import STOP_SECONDS

ALICE_PASSWORD = "alice-secret-7f3a"
BOB_PASSWORD = "bob-scram-secret-91c2"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'user_alice="{ALICE_PASSWORD}";'
)


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_pems(directory: Path) -> Path:
    """A CA, a server certificate for localhost and 127.0.0.1 (key and chain in one file, as
    Kafka's ``ssl.keystore.location`` PEM) and a client certificate ``CN=client,OU=eng,
    O=example``, in ``directory``."""
    d = directory
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{d}/ca-key.pem",
             "-out", f"{d}/ca.pem", "-days", "2", "-subj", "/CN=coordkit-test-ca")  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name, subject, ext in (
        ("server", "/CN=localhost", ["-extfile", f"{d}/san.ext"]),
        ("client", "/O=example/OU=eng/CN=client", []),
    ):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{d}/{name}-key.pem",
                 "-out", f"{d}/{name}.csr", "-subj", subject)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/ca.pem", "-CAkey",
                 f"{d}/ca-key.pem", "-CAcreateserial", "-out", f"{d}/{name}.pem", "-days", "2",
                 *ext)  # fmt: skip
    (d / "server-keystore.pem").write_text(
        (d / "server-key.pem").read_text() + (d / "server.pem").read_text()
    )
    return d


def security_args(pems: Path) -> list[str]:
    """``--config`` words of a broker with PLAINTEXT, SASL_PLAINTEXT, SASL_SSL and SSL (client
    certificates required) listeners, PLAIN and SCRAM enabled."""
    words = [
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
        "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={pems}/server-keystore.pem",
        f"ssl.truststore.location={pems}/ca.pem",
        "listener.name.ssl.ssl.client.auth=required",
    ]
    return [arg for word in words for arg in ("--config", word)]


class SecureServe:
    """A running ``coordkit serve`` and each listener's address (broker 0's)."""

    def __init__(self, args: list[str]) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from coordkit.cli import main; main()", "serve",
             "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        self.listeners: dict[str, str] = {}
        self.printed = ""
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.printed += line
            if match := re.match(r"broker 0 listening on (\S+)", line):
                self.listeners["PLAINTEXT"] = match.group(1)
            elif match := re.match(r"listener (\S+) of broker 0 on (\S+)", line):
                self.listeners[match.group(1)] = match.group(2)
            elif line.startswith("store "):
                return
        self.process.wait(STOP_SECONDS)
        raise AssertionError(f"coordkit serve did not start: {self.process.stderr.read()}")  # type: ignore[union-attr]

    def stop(self) -> tuple[str, str]:
        """Ctrl-C; its whole output and log."""
        if self.process.poll() is None:
            self.process.send_signal(2)
        out, err = self.process.communicate(timeout=STOP_SECONDS)
        return self.printed + out, err


def client_config(server: SecureServe, protocol: str, pems: Path, **extra: Any) -> dict[str, Any]:
    """A confluent-kafka config for ``server``'s listener ``protocol``."""
    config: dict[str, Any] = {
        "bootstrap.servers": server.listeners[protocol],
        "security.protocol": protocol,
    }
    if protocol.endswith("SSL"):
        config["ssl.ca.location"] = str(pems / "ca.pem")
    return {**config, **extra}


def scram(mechanism: str, user: str, password: str) -> dict[str, str]:
    return {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def create_topic(server: SecureServe, pems: Path, topic: str) -> None:
    admin = AdminClient(client_config(server, "PLAINTEXT", pems))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def create_scram_user(server: SecureServe, pems: Path, user: str, password: str) -> None:
    """``user`` with SCRAM-SHA-256 and -512 credentials, by AlterUserScramCredentials."""
    admin = AdminClient(client_config(server, "PLAINTEXT", pems))
    upserts = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    ]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(30)


def produce_and_consume(config: dict[str, Any], topic: str, count: int) -> list[bytes]:
    """``count`` records produced to ``topic``, then what a consumer of a group reads."""
    errors: list[str] = []
    producer = Producer({**config, "error_cb": lambda e: errors.append(str(e))})
    for i in range(count):
        producer.produce(topic, f"{topic}-{i}".encode())
    assert producer.flush(30) == 0, errors
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000})  # fmt: skip
    consumer.subscribe([topic])
    seen: list[bytes] = []
    try:
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen.append(message.value())
            if len(seen) == count:
                break
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen
