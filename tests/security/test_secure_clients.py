"""Real clients (confluent-kafka, kafka-python, aiokafka, Kafka's Java clients) over SASL_SSL with
SCRAM, over SASL_PLAINTEXT with PLAIN and over mutual TLS, producing and consuming in a group
against ``coordkit serve`` (tox -e py311-security; the default run has the short part in
tests/serve/test_security.py)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordkit.testing.servers.kafka_tools import KAFKA_KRAFT_VERSION, kafka_tool
from serve.security_servers import (
    ALICE_PASSWORD,
    BOB_PASSWORD,
    PLAIN_JAAS,
    SecureServe,
    client_config,
    create_scram_user,
    create_topic,
    make_pems,
    produce_and_consume,
    scram,
    security_args,
)
from serve.test_serve_cli import _serve


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pems(tmp_path_factory.mktemp("pems"))


@pytest.fixture(scope="module")
def secure(pems: Path) -> Iterator[SecureServe]:
    server = SecureServe(["--config", "group.min.session.timeout.ms=100", *security_args(pems)])
    create_scram_user(server, pems, "bob", BOB_PASSWORD)
    yield server
    out, err = server.stop()
    for secret in (ALICE_PASSWORD, BOB_PASSWORD):
        assert secret not in out + err


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_over_sasl_ssl_with_scram(
    secure: SecureServe, pems: Path, mechanism: str
) -> None:
    topic = f"confluent-{mechanism.lower()}"
    create_topic(secure, pems, topic)
    config = client_config(secure, "SASL_SSL", pems, **scram(mechanism, "bob", BOB_PASSWORD))
    assert produce_and_consume(config, topic, 3) == [f"{topic}-{i}".encode() for i in range(3)]


def test_confluent_kafka_over_mutual_tls(secure: SecureServe, pems: Path) -> None:
    create_topic(secure, pems, "mtls-topic")
    config = client_config(secure, "SSL", pems, **{
        "ssl.certificate.location": str(pems / "client.pem"),
        "ssl.key.location": str(pems / "client-key.pem"),
    })  # fmt: skip
    assert produce_and_consume(config, "mtls-topic", 3) == [
        f"mtls-topic-{i}".encode() for i in range(3)
    ]


def test_confluent_kafka_over_sasl_plaintext_with_plain(secure: SecureServe, pems: Path) -> None:
    create_topic(secure, pems, "plain-topic")
    config = client_config(secure, "SASL_PLAINTEXT", pems, **scram("PLAIN", "alice",
                                                                    ALICE_PASSWORD))  # fmt: skip
    assert produce_and_consume(config, "plain-topic", 2) == [b"plain-topic-0", b"plain-topic-1"]


def _tls(pems: Path, client_cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pems / "ca.pem"))
    if client_cert:
        context.load_cert_chain(str(pems / "client.pem"), str(pems / "client-key.pem"))
    return context


def test_kafka_python_over_sasl_ssl_with_scram(secure: SecureServe, pems: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    create_topic(secure, pems, "kafka-python-scram")
    common = {
        "bootstrap_servers": secure.listeners["SASL_SSL"],
        "security_protocol": "SASL_SSL",
        "ssl_context": _tls(pems),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "bob",
        "sasl_plain_password": BOB_PASSWORD,
    }
    producer = KafkaProducer(**common)
    for i in range(3):
        producer.send("kafka-python-scram", f"v{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer("kafka-python-scram", group_id="kp-scram",
                             auto_offset_reset="earliest", consumer_timeout_ms=15_000,
                             **common)  # fmt: skip
    seen = []
    for message in consumer:
        seen.append(message.value)
        if len(seen) == 3:
            break
    consumer.commit()
    consumer.close()
    assert seen == [b"v0", b"v1", b"v2"]


def test_aiokafka_over_mutual_tls(secure: SecureServe, pems: Path) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    create_topic(secure, pems, "aiokafka-mtls")

    async def run() -> list[bytes]:
        common = {"bootstrap_servers": secure.listeners["SSL"], "security_protocol": "SSL",
                  "ssl_context": _tls(pems, client_cert=True)}  # fmt: skip
        producer = AIOKafkaProducer(**common)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait("aiokafka-mtls", f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aiokafka-mtls", group_id="aio-mtls",
                                    auto_offset_reset="earliest", **common)  # fmt: skip
        await consumer.start()
        seen: list[bytes] = []
        try:
            while len(seen) < 3:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                for records in batch.values():
                    seen += [r.value for r in records]
            await consumer.commit()
        finally:
            await consumer.stop()
        return seen

    assert asyncio.run(run()) == [b"a0", b"a1", b"a2"]


@pytest.mark.parametrize(
    ("word", "shown"),
    [
        ("listeners=FOO://127.0.0.1:0", "listener FOO has no security protocol"),
        ("listeners=SASL_SSL:/x", "is not NAME://HOST:PORT"),
        ("ssl.keystore.location=/nonexistent/k.pem", "ssl.keystore.location"),
        ("sasl.enabled.mechanisms=GSSAPI", "GSSAPI is not served"),
        ("ssl.client.auth=sometimes", "not one of none, requested, required"),
        ("inter.broker.listener.name=NOPE", "not one of listeners"),
        ("ssl.keystore.type=JKS", "PEM only"),
        ("connections.max.reauth.ms=-5", "not a number of milliseconds"),
        (
            "listener.name.sasl_plaintext.plain.connections.max.reauth.ms=soon",
            "listener.name.sasl_plaintext.plain.connections.max.reauth.ms=soon: not a number",
        ),
        ("inter.broker.listener.name=SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol="),
    ],
)
def test_a_bad_security_config_is_one_line(word: str, shown: str) -> None:
    base = ["--port", "0", "--config",
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "--config", "sasl.enabled.mechanisms=PLAIN", "--config",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security"
            '.plain.PlainLoginModule required user_a="pw";']  # fmt: skip
    result = _serve(*base, "--config", word)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert shown in lines[0]


def _refused(tls: ssl.SSLSocket) -> bool:
    """Whether the server ends the connection (TLS 1.3: its refusal of a missing client
    certificate comes with the first read)."""
    from coordkit.protocol import KafkaCodec, messages

    request = KafkaCodec().encode_request(messages.ApiVersionsRequest(), version=0,
                                          correlation_id=1)  # fmt: skip
    try:
        tls.sendall(request)
        return tls.recv(4) == b""  # an accepted client gets ApiVersions' answer
    except (ssl.SSLError, ConnectionError):
        return True


def test_an_ssl_listener_requiring_certificates_refuses_a_client_without_one(
    secure: SecureServe, pems: Path
) -> None:
    import socket

    host, port = secure.listeners["SSL"].rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=20) as sock,
        _tls(pems).wrap_socket(sock, server_hostname="localhost") as tls,
    ):
        assert _refused(tls)
    with (
        socket.create_connection((host, int(port)), timeout=20) as sock,
        _tls(pems, client_cert=True).wrap_socket(sock, server_hostname="localhost") as tls,
    ):
        assert not _refused(tls)


# -- Kafka's Java clients (the console producer and consumer of Kafka 4.4's jars) ----------------


def _java_config(path: Path, pems: Path, **settings: str) -> Path:
    """A Java client config file: ``settings`` over Kafka's PEM trust store of the test CA."""
    lines = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pems / "ca.pem"),
             **settings}  # fmt: skip
    path.write_text("".join(f"{name}={value}\n" for name, value in lines.items()))
    return path


def _java_produce_and_consume(
    address: str, config: Path, topic: str, count: int, *consumer_properties: str
) -> list[str]:
    """``count`` values produced to ``topic`` by kafka-console-producer, then what
    kafka-console-consumer reads of them in a group of its own (committing as it closes)."""
    values = [f"{topic}-{i}" for i in range(count)]
    produced = kafka_tool(KAFKA_KRAFT_VERSION, "kafka-console-producer", "--bootstrap-server",
                          address, "--topic", topic, "--command-config", str(config),
                          input="".join(f"{v}\n" for v in values))  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = kafka_tool(KAFKA_KRAFT_VERSION, "kafka-console-consumer", "--bootstrap-server",
                          address, "--topic", topic, "--group", f"java-{topic}",
                          "--from-beginning", "--max-messages", str(count), "--timeout-ms",
                          "60000", "--command-config", str(config),
                          *(a for p in consumer_properties for a in ("--command-property", p)))  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    return consumed.stdout.split()


def test_java_clients_over_sasl_ssl_with_scram(
    secure: SecureServe, pems: Path, tmp_path: Path
) -> None:
    create_topic(secure, pems, "java-scram")
    config = _java_config(tmp_path / "scram.properties", pems, **{
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                            f'username="bob" password="{BOB_PASSWORD}";',
    })  # fmt: skip
    found = _java_produce_and_consume(secure.listeners["SASL_SSL"], config, "java-scram", 3)
    assert found == ["java-scram-0", "java-scram-1", "java-scram-2"]


def test_java_clients_over_mutual_tls_in_a_consumer_protocol_group(
    secure: SecureServe, pems: Path, tmp_path: Path
) -> None:
    """The client certificate's key and chain in one PEM file (Kafka's ``ssl.keystore.type=PEM``);
    the consumer in a KIP-848 group (``group.protocol=consumer``)."""
    create_topic(secure, pems, "java-mtls")
    keystore = tmp_path / "client-keystore.pem"
    keystore.write_text((pems / "client-key.pem").read_text() + (pems / "client.pem").read_text())
    config = _java_config(tmp_path / "mtls.properties", pems, **{
        "security.protocol": "SSL", "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
    })  # fmt: skip
    found = _java_produce_and_consume(secure.listeners["SSL"], config, "java-mtls", 3,
                                      "group.protocol=consumer")  # fmt: skip
    assert found == ["java-mtls-0", "java-mtls-1", "java-mtls-2"]


#: Short enough for a few re-authentications while a slow producer sends.
REAUTH_MS = 1500


@pytest.fixture(scope="module")
def reauthenticating() -> Iterator[SecureServe]:
    words = ["listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
             "sasl.enabled.mechanisms=PLAIN",
             f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
             f"connections.max.reauth.ms={REAUTH_MS}"]  # fmt: skip
    server = SecureServe([arg for word in words for arg in ("--config", word)])
    yield server
    out, err = server.stop()
    assert ALICE_PASSWORD not in out + err


def test_java_clients_reauthenticate_as_their_sessions_end(
    reauthenticating: SecureServe, pems: Path, tmp_path: Path
) -> None:
    """KIP-368 with Kafka's own client: a producer sending for several session lifetimes
    re-authenticates on its connections (no failed re-authentication, no connection dropped:
    nothing on its standard error) and every record is written; a consumer reads them all."""
    create_topic(reauthenticating, pems, "java-reauth")
    config = _java_config(tmp_path / "plain.properties", pems, **{
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                            f'username="alice" password="{ALICE_PASSWORD}";',
    })  # fmt: skip
    address = reauthenticating.listeners["SASL_PLAINTEXT"]
    sent = kafka_tool(KAFKA_KRAFT_VERSION, "kafka-producer-perf-test", "--topic", "java-reauth",
                      "--num-records", "20", "--throughput", "4", "--record-size", "16",
                      "--command-config", str(config), "--producer-props",
                      f"bootstrap.servers={address}", "acks=all")  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    assert "20 records sent" in sent.stdout
    assert sent.stderr.strip() == ""
    consumed = kafka_tool(KAFKA_KRAFT_VERSION, "kafka-console-consumer", "--bootstrap-server",
                          address, "--topic", "java-reauth", "--group", "java-reauth",
                          "--from-beginning", "--max-messages", "20", "--timeout-ms", "60000",
                          "--command-config", str(config))  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert len(consumed.stdout.splitlines()) == 20
