"""The ``coordkit`` command line: version, help, plugins, tree, clear errors."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from coordkit import __version__
from coordkit.cli import main
from coordkit.kafka import layout
from coordkit.kafka.model import BrokerInfo, PartitionState
from coordkit.plugins import open_store
from coordkit.store import MetadataStore
from coordkit_memory import MemoryServer


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def kafka_tree() -> Iterator[MetadataStore]:
    store = open_store("memory://cli-tree")
    store.create(layout.BROKER_IDS, make_parents=True)
    store.create(
        layout.broker_path(0),
        layout.BROKER.encode(BrokerInfo("h0", 9092, "1700000000000")),
        ephemeral=True,
    )
    store.create(
        layout.partition_state_path("orders", 0),
        layout.PARTITION_STATE.encode(
            PartitionState(leader=0, leader_epoch=2, isr=(0,), controller_epoch=1)
        ),
        make_parents=True,
    )
    store.create("/controller_epoch", b"not-a-number")
    yield store
    store.close()
    MemoryServer.discard("cli-tree")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert __version__ in out


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for command in ("plugins", "tree", "lab"):
        assert command in out


def test_every_subcommand_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("plugins", "tree", "lab"):
        code, out, _ = run(capsys, command, "--help")
        assert code == 0
        assert "Usage:" in out


def test_plugins_json_lists_builtins(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plugins", "--format", "json")
    assert code == 0
    plugins = {p["name"]: p for p in json.loads(out)}
    assert plugins["memory"]["registered"] == {"store scheme": ["memory"]}
    assert plugins["memory"]["builtin"] is True
    assert plugins["memory"]["distribution"] == "coordkit"


def test_plugins_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plugins")
    assert code == 0
    assert "memory" in out
    assert "coordkit_memory" in out


def test_tree_json_decodes_kafka_nodes(
    capsys: pytest.CaptureFixture[str], kafka_tree: MetadataStore
) -> None:
    code, out, err = run(capsys, "tree", "--store", "memory://cli-tree", "--format", "json")
    # The fixture holds malformed nodes: listed, then named, exit status 2.
    assert code == 2
    assert "error: malformed /" in err
    assert "(and 1 more node(s), marked above)" in err
    nodes = json.loads(out)
    broker = nodes["/brokers/ids/0"]
    assert broker["ephemeral"] is True
    assert broker["kind"] == "broker registration"
    assert broker["value"]["host"] == "h0"
    state = nodes["/brokers/topics/orders/partitions/0/state"]
    assert state["value"] == {
        "controller_epoch": 1,
        "leader": 0,
        "version": 1,
        "leader_epoch": 2,
        "isr": [0],
    }
    assert "problem" not in state
    assert "expected an integer" in nodes["/controller_epoch"]["problem"]


def test_tree_text_shows_paths_values_and_problems(
    capsys: pytest.CaptureFixture[str], kafka_tree: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(capsys, "tree", "--store", "memory://cli-tree")
    assert code == 2  # the malformed /controller_epoch (listed, then named)
    assert "brokers" in out
    assert "(ephemeral)" in out
    assert '"leader_epoch":2' in out
    assert "malformed" in out


def test_tree_of_a_subtree_with_depth(
    capsys: pytest.CaptureFixture[str], kafka_tree: MetadataStore
) -> None:
    code, out, _ = run(
        capsys,
        "tree",
        "--store",
        "memory://cli-tree",
        "--format",
        "json",
        "--depth",
        "1",
        "/brokers",
    )
    assert code == 0
    assert set(json.loads(out)) == {"/brokers", "/brokers/ids", "/brokers/topics"}


def test_tree_store_from_environment(
    capsys: pytest.CaptureFixture[str], kafka_tree: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COORDKIT_STORE", "memory://cli-tree")
    code, out, _ = run(capsys, "tree", "--format", "json", "/brokers/ids")
    assert code == 0
    assert list(json.loads(out)) == ["/brokers/ids", "/brokers/ids/0"]


def test_tree_of_missing_path_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "tree", "--store", "memory://", "/nowhere")
    assert code == 2
    assert "/nowhere" in err


def test_unknown_store_scheme_lists_available(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "tree", "--store", "etcd://localhost:2379")
    assert code == 2
    assert "unknown store scheme 'etcd'" in err
    assert "memory" in err


def test_bad_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "tree", "--depth", "-1")
    assert code == 2
    assert "depth" in err
