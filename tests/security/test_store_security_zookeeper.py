"""The ZooKeeper store's own security beside Kafka 3.9's (#36 item 4), Kafka being the oracle.

One ZooKeeper takes SASL DIGEST-MD5 logins; a Kafka 3.9 broker (ZooKeeper mode, its JAAS
``Client`` section given by ``-Djava.security.auth.login.config``) and ``coordkit serve`` (the
same file through ``zookeeper://...?jaas=FILE``) log in as the same user, both with
``zookeeper.set.acl=true``, each on a chroot of its own. Both are asked the same things (a topic,
its config, a SCRAM user, literal and prefixed ACLs); then:

* every node both trees have carries the same ACL on both sides, and every node either side wrote
  carries the ACL of Kafka's rule (``ZkData.defaultAcls``);
* a client without credentials reads what Kafka lets it read, not ``/config/users/...``, and
  changes nothing, on both;
* each side reads the other's nodes: ``coordkit serve`` started on Kafka's chroot describes the
  user and the ACLs Kafka made, a Kafka broker started on coordkit's chroot those coordkit made.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions

from coordkit.errors import AuthFailedError
from coordkit.plugins import open_store
from coordkit.serve import KafkaServer
from coordkit.store import Create
from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper
from coordkit.testing.servers.kafka_tools import JVM_OPTIONS
from coordkit.testing.servers.zookeeper_sasl import kafka_jvm_options, write_client_jaas
from coordkit.testing.waiting import wait_for
from coordkit_zookeeper.security import default_acls
from harness.docs import code_block, page

ZK_USER = "kafka"
ZK_PASSWORD = "zk-sasl-secret-8d1e"
CAROL_PASSWORD = "carol-scram-secret-41b7"
KAFKA_CHROOT = "/kafka39"
COORDKIT_CHROOT = "/coordkit"
BROKER_ID = 1
TOPIC = "guarded"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
BROKER_CONFIGS = {
    "zookeeper.set.acl": "true",
    "authorizer.class.name": AUTHORIZER,
    # The PLAINTEXT listener's principal: the admin client of this test may do everything.
    "super.users": "User:ANONYMOUS",
}
#: Nodes each side must have written (paths inside the chroot), whose ACLs are compared.
REQUIRED = (
    "/brokers/ids",
    f"/brokers/ids/{BROKER_ID}",
    "/brokers/topics",
    f"/brokers/topics/{TOPIC}",
    f"/brokers/topics/{TOPIC}/partitions/0/state",
    "/config",
    "/config/topics",
    f"/config/topics/{TOPIC}",
    "/config/changes",
    "/config/users",
    "/config/users/carol",
    "/kafka-acl/Topic",
    f"/kafka-acl/Topic/{TOPIC}",
    "/kafka-acl-changes",
    "/kafka-acl-extended/prefixed/Topic/pre-",
    "/controller",
    "/controller_epoch",
    "/cluster/id",
)
STOP_SECONDS = 60
SET = AlterConfigOpType.SET


def _sasl_client(zookeeper: StandaloneZooKeeper) -> KazooClient:
    client = KazooClient(
        hosts=zookeeper.hosts,
        sasl_options={"mechanism": "DIGEST-MD5", "username": ZK_USER, "password": ZK_PASSWORD},
    )
    client.start(timeout=20)
    return client


@pytest.fixture(scope="module")
def zookeeper() -> Iterator[StandaloneZooKeeper]:
    server = StandaloneZooKeeper(sasl_users={ZK_USER: ZK_PASSWORD, "other": "other-secret"})
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def jaas(zookeeper: StandaloneZooKeeper) -> Path:
    return write_client_jaas(zookeeper.root / "client-jaas.conf", ZK_USER, ZK_PASSWORD)


class Served:
    """``coordkit serve --broker-id N`` (``--config`` each of ``words``) whose store URL, with its
    password or the JAAS file's path, is in its environment (``$COORDKIT_STORE``), as a user
    keeps it out of the process list, not in its arguments."""

    def __init__(
        self, store_url: str, *words: str, broker_id: int = BROKER_ID, cwd: Path | None = None
    ) -> None:
        args = [arg for word in words for arg in ("--config", word)]
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from coordkit.cli import main; main()", "serve",
             "--broker-id", str(broker_id), "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1", COORDKIT_STORE=store_url), cwd=cwd,
        )  # fmt: skip
        self.printed = ""
        self.bootstrap = ""
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.printed += line
            if match := re.match(r"broker \d+ listening on (\S+)", line):
                self.bootstrap = match.group(1)
            elif line.startswith("store "):
                return
        self.process.wait(STOP_SECONDS)
        raise AssertionError(f"coordkit serve did not start: {self.process.stderr.read()}")  # type: ignore[union-attr]

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.send_signal(2)
        out, err = self.process.communicate(timeout=STOP_SECONDS)
        return self.printed + out + err


def _kafka(zookeeper: StandaloneZooKeeper, chroot: str, jaas: Path) -> KafkaCluster:
    return KafkaCluster(
        zookeeper=zookeeper.hosts,
        chroot=chroot,
        broker_ids=(BROKER_ID,),
        properties=BROKER_CONFIGS,
        jvm_options=(*JVM_OPTIONS, *kafka_jvm_options(jaas)),
    )


def _ask(bootstrap: str) -> None:
    """The same requests to either side: a topic, its config, a SCRAM user, two ACLs."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(60)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        TOPIC,
        incremental_configs=[ConfigEntry("retention.ms", "600000", incremental_operation=SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result(60)
    carol = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), CAROL_PASSWORD.encode()
    )
    admin.alter_user_scram_credentials([carol])["carol"].result(60)
    bindings = [
        AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:carol", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, "pre-", ResourcePatternType.PREFIXED, "User:carol", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW),
    ]  # fmt: skip
    for future in admin.create_acls(bindings).values():
        future.result(60)


def _what_it_reads(bootstrap: str) -> dict[str, Any]:
    """The user and the ACLs a broker describes (it reads them from its chroot's nodes)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # A broker that just took the chroot over knows the topic once its controller has told it.
    wait_for(lambda: TOPIC in admin.list_topics(timeout=10).topics, 60, f"{TOPIC} in metadata")
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(60)
    acls = admin.describe_acls(
        AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)
    ).result(60)  # fmt: skip
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    configs = admin.describe_configs([resource])[resource].result(60)
    return {
        "carol": [(c.mechanism.name, c.iterations) for c in described.scram_credential_infos],
        "acls": sorted(
            (a.name, a.resource_pattern_type.name, a.principal, a.operation.name) for a in acls
        ),
        "retention.ms": configs["retention.ms"].value,
    }


def _tree(client: KazooClient, chroot: str) -> dict[str, list[tuple[str, str, int]]]:
    """Every node under ``chroot`` (by its path inside) and its ACL."""
    out: dict[str, list[tuple[str, str, int]]] = {}
    frontier = [""]
    while frontier:
        path = frontier.pop()
        acls, _ = client.get_acls(chroot + path or "/")
        out[path or "/"] = sorted((a.id.scheme, a.id.id, a.perms) for a in acls)
        frontier.extend(f"{path}/{child}" for child in client.get_children(chroot + path))
    return out


def _rule(path: str) -> list[tuple[str, str, int]]:
    """Kafka's ``defaultAcls(true, path)`` as ZooKeeper stores it for the SASL user."""
    return sorted(
        ("sasl", ZK_USER, a.perms) if a.id.scheme == "auth" else (a.id.scheme, a.id.id, a.perms)
        for a in default_acls(True, path)
    )


def _anonymous(zookeeper: StandaloneZooKeeper, chroot: str) -> dict[str, Any]:
    """What a client without credentials may read of :data:`REQUIRED`, and whether any of four
    writes got through."""
    anonymous = KazooClient(hosts=zookeeper.hosts + chroot)
    anonymous.start(timeout=20)
    readable: dict[str, bool] = {}
    written: list[str] = []
    try:
        for path in REQUIRED:
            try:
                anonymous.get(path)
                readable[path] = True
            except NoAuthError:
                readable[path] = False
        for name, attempt in (
            ("set a topic config", lambda: anonymous.set(f"/config/topics/{TOPIC}", b"{}")),
            ("create a topic", lambda: anonymous.create("/brokers/topics/intruder", b"{}")),
            ("create a user", lambda: anonymous.create("/config/users/mallory", b"{}")),
            ("delete an ACL", lambda: anonymous.delete(f"/kafka-acl/Topic/{TOPIC}")),
        ):
            try:
                attempt()
                written.append(name)
            except NoAuthError:
                pass
    finally:
        anonymous.stop()
    return {"readable": readable, "written": written}


@pytest.fixture(scope="module")
def trees(zookeeper: StandaloneZooKeeper, jaas: Path) -> dict[str, Any]:
    """Both sides asked the same things; while they run, their trees' ACLs and what a client
    without credentials may do there. Both are stopped before the tests read the results."""
    kafka = _kafka(zookeeper, KAFKA_CHROOT, jaas).start()
    served: Served | None = None
    try:
        served = Served(
            f"zookeeper://{zookeeper.hosts}{COORDKIT_CHROOT}?jaas={jaas}",
            *(f"{k}={v}" for k, v in BROKER_CONFIGS.items()),
        )
        _ask(kafka.bootstrap)
        _ask(served.bootstrap)
        client = _sasl_client(zookeeper)
        try:
            found: dict[str, Any] = {
                "kafka": _tree(client, KAFKA_CHROOT),
                "coordkit": _tree(client, COORDKIT_CHROOT),
            }
        finally:
            client.stop()
        found["anonymous"] = {
            side: _anonymous(zookeeper, chroot)
            for side, chroot in (("kafka", KAFKA_CHROOT), ("coordkit", COORDKIT_CHROOT))
        }
    finally:
        log = served.stop() if served else ""
        kafka.close()
    found["log"] = log
    return found


def test_both_sides_wrote_the_nodes_compared(trees: dict[str, Any]) -> None:
    for side in ("kafka", "coordkit"):
        missing = [path for path in REQUIRED if path not in trees[side]]
        assert missing == [], f"{side} wrote no {missing}"


def test_a_node_both_sides_have_carries_the_same_acl(trees: dict[str, Any]) -> None:
    kafka, coordkit = trees["kafka"], trees["coordkit"]
    shared = sorted(set(kafka) & set(coordkit))
    assert len(shared) >= len(REQUIRED)
    differing = {
        path: (kafka[path], coordkit[path]) for path in shared if kafka[path] != coordkit[path]
    }
    assert differing == {}


def test_every_node_carries_the_acl_of_kafkas_rule(trees: dict[str, Any]) -> None:
    for side in ("kafka", "coordkit"):
        wrong = {path: acl for path, acl in trees[side].items() if acl != _rule(path)}
        assert wrong == {}, side
    # The rule itself, as it was read back: the credentials world may not read.
    world_read = ("world", "anyone", Permissions.READ)
    assert world_read not in trees["coordkit"]["/config/users/carol"]
    assert world_read in trees["coordkit"][f"/config/topics/{TOPIC}"]


def test_a_client_without_credentials_reads_what_kafka_lets_it(trees: dict[str, Any]) -> None:
    expected = {
        "readable": {path: not path.startswith("/config/users") for path in REQUIRED},
        "written": [],
    }
    assert trees["anonymous"] == {"kafka": expected, "coordkit": expected}


def test_no_secret_in_coordkit_serves_output(trees: dict[str, Any]) -> None:
    assert "listening on" in trees["log"]
    assert ZK_PASSWORD not in trees["log"]
    assert CAROL_PASSWORD not in trees["log"]


def test_each_side_reads_the_nodes_the_other_wrote(
    trees: dict[str, Any], zookeeper: StandaloneZooKeeper, jaas: Path
) -> None:
    read: dict[str, Any] = {}
    # Each side's broker 1 stopped with `trees`: the other kind takes its chroot over, once the
    # session of Kafka's (killed) broker has expired.
    client = _sasl_client(zookeeper)
    try:
        gone = f"{KAFKA_CHROOT}/brokers/ids/{BROKER_ID}"
        wait_for(lambda: client.exists(gone) is None, 60, "Kafka's broker session expired")
    finally:
        client.stop()
    served = Served(
        f"zookeeper://{zookeeper.hosts}{KAFKA_CHROOT}?jaas={jaas}",
        *(f"{k}={v}" for k, v in BROKER_CONFIGS.items()),
    )
    try:
        read["coordkit on kafka's nodes"] = _what_it_reads(served.bootstrap)
    finally:
        log = served.stop()
    assert ZK_PASSWORD not in log
    with _kafka(zookeeper, COORDKIT_CHROOT, jaas) as kafka:
        read["kafka on coordkit's nodes"] = _what_it_reads(kafka.bootstrap)
    expected = {
        "carol": [("SCRAM_SHA_256", 4096)],
        "acls": [
            (TOPIC, "LITERAL", "User:carol", "READ"),
            ("pre-", "PREFIXED", "User:carol", "WRITE"),
        ],
        "retention.ms": "600000",
    }
    assert read == {"coordkit on kafka's nodes": expected, "kafka on coordkit's nodes": expected}


DOCS_SECTION = "ZooKeeper: ACLs and SASL"


def test_the_docs_session_runs(zookeeper: StandaloneZooKeeper, tmp_path: Path) -> None:
    """docs/serve.md's JAAS file and ``coordkit serve`` as written (the ZooKeeper's address and
    the fixture's password exchanged for the page's), from the directory holding the file."""
    jaas_text = code_block(page("serve.md"), DOCS_SECTION, "text").text
    assert 'username="kafka"' in jaas_text
    (tmp_path / "zk_client_jaas.conf").write_text(
        jaas_text.replace('password="kafka-zk-secret"', f'password="{ZK_PASSWORD}"')
    )
    export, command = code_block(page("serve.md"), DOCS_SECTION, "sh").text.strip().splitlines()
    url = shlex.split(export.removeprefix("export "))[0].split("=", 1)[1]
    url = url.replace("127.0.0.1:2181", zookeeper.hosts)
    words = shlex.split(command)
    assert words[:4] == ["coordkit", "serve", "--broker-id", str(BROKER_ID)]
    assert words[4:6] == ["--port", "9092"]
    configs = words[7::2]
    assert words[6::2] == ["--config"] * len(configs)
    served = Served(url, *configs, cwd=tmp_path)
    client = _sasl_client(zookeeper)
    try:
        acl, _ = client.get_acls(f"/kafka/brokers/ids/{BROKER_ID}")
        assert sorted((a.id.scheme, a.id.id, a.perms) for a in acl) == _rule("/brokers/ids/1")
    finally:
        client.stop()
        log = served.stop()
    assert ZK_PASSWORD not in log
    # The same without the JAAS file: refused at start, nothing written.
    refused = subprocess.run(
        [sys.executable, "-c", "from coordkit.cli import main; main()", *words[1:]],
        env=dict(os.environ, COORDKIT_STORE=url.split("?")[0] + "-open"),
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert "set_acl=true needs an authenticated identity" in line
    client = _sasl_client(zookeeper)
    try:
        assert client.exists("/kafka-open") is None
    finally:
        client.stop()


def test_no_secret_in_any_log_record_of_a_sasl_login(
    zookeeper: StandaloneZooKeeper, jaas: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The store's SASL login, right and wrong, and a broker on it, with every logger at DEBUG
    (kazoo's per-request lines included): no password in any record or error."""
    caplog.set_level(1)
    store = open_store(f"zookeeper://{zookeeper.hosts}/logged?jaas={jaas}")
    try:
        store.create("/config/users/alice", b"{}", make_parents=True)
        assert store.get("/config/users/alice")[0] == b"{}"
    finally:
        store.close()
    # A broker on the URL's own credentials (auth=sasl), a topic produced to.
    url = f"zookeeper://{ZK_USER}:{ZK_PASSWORD}@{zookeeper.hosts}/logged-serve?auth=sasl"
    server = KafkaServer(url, [0], port=0)
    with server.running():
        thread = threading.Thread(target=lambda: asyncio.run(server.serve()))
        thread.start()
        try:
            bootstrap = str(server.addresses[0])
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic("logged", 1, 1)])["logged"].result(60)
            producer = Producer({"bootstrap.servers": bootstrap})
            producer.produce("logged", b"a record")
            assert producer.flush(60) == 0
        finally:
            server.stop()
            thread.join(timeout=30)
    wrong_password = "wrong-" + ZK_PASSWORD[::-1]
    wrong = write_client_jaas(tmp_path / "wrong.conf", ZK_USER, wrong_password)
    with pytest.raises(AuthFailedError) as refused:
        open_store(f"zookeeper://{zookeeper.hosts}/logged?jaas={wrong}&connect_timeout=5")
    url_login = f"zookeeper://{ZK_USER}:{wrong_password}@{zookeeper.hosts}/logged?auth=sasl"
    with pytest.raises(AuthFailedError) as refused_url:
        open_store(url_login + "&connect_timeout=5")
    assert any("SASL" in r.getMessage() for r in caplog.records)
    assert "response=" not in caplog.text  # DIGEST-MD5's hash of the password
    for text in (caplog.text, str(refused.value), str(refused_url.value)):
        assert ZK_PASSWORD not in text
        assert wrong_password not in text


@pytest.mark.parametrize("login", ["jaas", "digest"])
def test_every_way_the_store_creates_a_node_gives_kafkas_acl(
    zookeeper: StandaloneZooKeeper, jaas: Path, login: str
) -> None:
    """create (with and without parents, ephemeral, sequential), commit and apply: each node the
    store makes carries ``defaultAcls(true, path)`` for its identity, SASL's or digest's."""
    root = f"/ways-{login}"
    credentials = f"?jaas={jaas}" if login == "jaas" else ""
    userinfo = f"{ZK_USER}:{ZK_PASSWORD}@" if login == "digest" else ""
    store = open_store(f"zookeeper://{userinfo}{zookeeper.hosts}{root}{credentials}")
    try:
        store.create("/config/users/alice", b"{}", make_parents=True)
        store.create("/brokers/ids/1", b"{}", make_parents=True, ephemeral=True)
        made = store.create("/config/changes/config_change_", b"{}", make_parents=True,
                            sequential=True)  # fmt: skip
        store.commit([Create("/config/brokers"), Create("/config/brokers/1", b"{}")])
        store.apply([Create("/consumers"), Create("/delegation_token"),
                     Create("/delegation_token/tokens"), Create("/kafka-acl")])  # fmt: skip
        # The ACLs read back as the store's identity (the world may not read /config/users).
        if login == "jaas":
            client = _sasl_client(zookeeper)
        else:
            client = KazooClient(hosts=zookeeper.hosts, auth_data=[("digest", userinfo[:-1])])
            client.start(timeout=20)
        try:
            found = _tree(client, root)
        finally:
            client.stop()
    finally:
        store.close()
    for path in ("/config/users/alice", "/brokers/ids/1", made, "/config/brokers/1", "/consumers",
                 "/delegation_token/tokens", "/kafka-acl", "/config", "/"):  # fmt: skip
        expected = _rule(path)
        if login == "digest":  # the creator is the digest identity: user and password hash
            expected = sorted(
                (("digest", found[path][0][1], p) if s == "sasl" else (s, i, p))
                for s, i, p in expected
            )
            assert found[path][0][1].startswith(f"{ZK_USER}:") or path == "/consumers"
        assert found[path] == expected, path
