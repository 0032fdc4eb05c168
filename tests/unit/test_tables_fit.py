"""Issue 12: "every table (`lab run`, `lab show`, `assign`, `group`, `cluster`, `plugins`) is
readable at 80 columns: today numbers are cut (`101.…`) and strategy names too (`coope…`), even at
120." Tables degrade (abbreviated headers with a legend, split tables, stacked rows) and never cut
a number or a name; checked at COLUMNS=80 and 120 for every command's tables, and for any table at
widths from 60 up.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Iterator

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console, RenderableType

from coordkit.cli import cli
from coordkit.cli.cluster.view import render
from coordkit.cli.group.view import GroupSnapshot, MemberRow, RebalanceRow, render_snapshot
from coordkit.cli.tables import Column, FittedTable, Kind, abbreviations
from coordkit.engine import ClusterView, OpCounts, PartitionView
from coordkit.engine.groups import metadata
from coordkit.kafka.model import TopicPartition
from coordkit.plugins import open_store
from coordkit.store import MetadataStore
from coordkit_lab.analysis import key_metrics
from coordkit_lab.report import build_report_data, key_table
from coordkit_memory import MemoryServer

WIDTHS = (80, 120)


def rendered(renderable: RenderableType, width: int) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return out.getvalue()


def assert_whole(output: str, numbers: Iterable[str], width: int) -> None:
    """Every one of ``numbers`` is printed in one piece (no digit glued to either side, so neither
    cut, folded nor run into another), nothing is elided, and no line is wider than ``width``."""
    assert "…" not in output, output
    for line in output.splitlines():
        assert cell_len(line) <= width, (width, line)
    for number in numbers:
        pattern = rf"(?<![0-9.]){re.escape(number)}(?![0-9])"
        assert re.search(pattern, output), f"{number!r} is not whole at {width}:\n{output}"


def names_whole(output: str, names: Iterable[str]) -> None:
    for name in names:
        assert name in output, f"{name!r} was cut:\n{output}"


# -- any table -----------------------------------------------------------------------------------

numbers = st.one_of(
    st.integers(min_value=0, max_value=10**15).map(lambda n: f"{n:,}"),
    st.floats(min_value=0, max_value=1e9, allow_nan=False).map(lambda x: f"{x:,.3f}"),
    st.floats(min_value=1e-300, max_value=1e300).map(lambda x: f"{x:.6g}"),
)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_.", min_size=1, max_size=30)
lists = st.lists(st.integers(min_value=0, max_value=99_999), max_size=60).map(
    lambda xs: "t0[" + ",".join(map(str, xs)) + "]"
)
sentences = st.lists(names, max_size=25).map(" ".join)


@st.composite
def tables(draw: st.DrawFn) -> tuple[FittedTable, list[str], list[str]]:
    kinds = draw(st.lists(st.sampled_from(list(Kind)), min_size=1, max_size=9))
    headers = draw(st.lists(names, min_size=len(kinds), max_size=len(kinds), unique=True))
    short = abbreviations(headers)
    columns = [
        Column(header, kind, short[header] if draw(st.booleans()) else None)
        for header, kind in zip(headers, kinds, strict=True)
    ]
    cell = {Kind.NUMBER: numbers, Kind.NAME: names, Kind.TEXT: lists | sentences}
    rows = draw(
        st.lists(st.tuples(*(cell[kind] for kind in kinds)).map(list), min_size=1, max_size=6)
    )
    shown_numbers = [c for row in rows for c, k in zip(row, kinds, strict=True) if k is Kind.NUMBER]
    for row in rows:
        for value, kind in zip(row, kinds, strict=True):
            if kind is Kind.TEXT and value.startswith("t0["):
                shown_numbers += re.findall(r"[0-9]+", value)
    shown_names = [c for row in rows for c, k in zip(row, kinds, strict=True) if k is Kind.NAME]
    return FittedTable(columns, rows, title="t", keys=1), shown_numbers, shown_names


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.integers(min_value=60, max_value=200))
def test_any_table_keeps_every_number_whole_at_any_width(
    case: tuple[FittedTable, list[str], list[str]], width: int
) -> None:
    """Issue 12: "never truncates a number": a table of random columns and cells, at any width
    from 60 columns up."""
    table, shown_numbers, shown_names = case
    output = rendered(table, width)
    assert_whole(output, shown_numbers, width)
    if width >= 80:
        collapsed = "".join(output.split())
        for name in shown_names:  # a name longer than a line folds, but is all there
            assert name in collapsed


def test_the_layout_degrades_in_steps() -> None:
    """Full headers when they fit; abbreviations with a legend; split tables; stacked rows."""
    columns = [Column("strategy")] + [
        Column(f"metric_number_{i}", Kind.NUMBER, f"m{i}") for i in range(8)
    ]
    rows = [["cooperative-sticky", *(f"{101.5 + i:,.1f}" for i in range(8))]]
    table = FittedTable(columns, rows)
    assert "metric_number_7" in rendered(table, 200).splitlines()[1]
    legend = rendered(table, 80)
    assert "m7 = metric_number_7" in legend
    assert re.search(r"┃\s+m0 ┃", legend)
    split = rendered(table, 45)
    assert split.count("cooperative-sticky") == 4  # four tables of two metrics each
    stacked = rendered(
        FittedTable([Column("x" * 50), Column("n", Kind.NUMBER)], [["y" * 60, "7"]]), 40
    )
    assert "┃" not in stacked
    for output, width in ((legend, 80), (split, 45)):
        assert_whole(output, rows[0][1:], width)
        names_whole(output, ["cooperative-sticky"])


# -- every command's tables ----------------------------------------------------------------------


@pytest.fixture
def group_store() -> Iterator[MetadataStore]:
    store = open_store("memory://tables-fit")
    members = [
        metadata.PersistedMember(
            member_id=f"consumer-{i}-3f9c2a1e-7b5d-4e8f-9a0b-{i:012d}",
            group_instance_id=f"instance-{i}",
            client_id=f"client-{i}",
            session_timeout=45.0,
            rebalance_timeout=300.0,
            protocols=("cooperative-sticky", "range"),
            topics=("orders", "payments-eu-west-1"),
            assignment=[TopicPartition("orders", p) for p in range(i, 250, 3)],
            join_order=i,
        )
        for i in range(3)
    ]
    group = metadata.GroupMetadata("g", 1234567, "consumer", "cooperative-sticky", "x", members)
    store.create("/coordkit/groups/g", metadata.encode(group), make_parents=True)
    for p in range(3):
        store.create(
            f"/consumers/g/offsets/orders/{p}", str(98765432101 + p).encode(), make_parents=True
        )
        store.create(
            f"/consumers/g/owners/orders/{p}",
            f"g_host-1700000000000-{p}".encode(),
            make_parents=True,
        )
    yield store
    store.close()
    MemoryServer.discard("tables-fit")


@pytest.mark.parametrize("width", WIDTHS)
def test_group_describe_fits(group_store: MetadataStore, width: int) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "group",
            "describe",
            "--store",
            "memory://tables-fit",
            "--group",
            "g",
            "--offset-storage",
            "zookeeper",
        ],
        env={"COLUMNS": str(width)},
    )
    assert result.exit_code == 0, result.output
    expected = ["1234567"]
    expected += [str(98765432101 + p) for p in range(3)]
    expected += [str(p) for p in range(0, 250, 3)]
    assert_whole(result.output, expected, width)
    names_whole(
        result.output, ["cooperative-sticky", "consumer-2-3f9c2a1e-7b5d-4e8f-9a0b-000000000002"]
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_assign_fits(width: int) -> None:
    group = {
        "topics": {
            "orders": {"partitions": 40, "loads": [123456.789 + i for i in range(40)]},
            "payments-eu-west-1": 17,
        },
        "members": {
            f"consumer-{i}-3f9c2a1e-7b5d-4e8f": {
                "topics": ["orders", "payments-eu-west-1"],
                "instance_id": f"instance-{i}",
                "rack": f"eu-west-1{'abc'[i % 3]}",
            }
            for i in range(5)
        },
    }
    text = json.dumps(group)
    document = CliRunner().invoke(
        cli, ["assign", "-a", "roundrobin", "--format", "json"], input=text
    )
    result = CliRunner().invoke(
        cli, ["assign", "-a", "roundrobin"], input=text, env={"COLUMNS": str(width)}
    )
    assert result.exit_code == document.exit_code == 0, result.output
    summary = json.loads(document.output)["summary"]
    loads = {m: 0.0 for m in summary["counts"]}
    weights = dict(enumerate(group["topics"]["orders"]["loads"]))  # type: ignore[index]
    for member, parts in json.loads(document.output)["assignment"].items():
        for tp in parts:
            topic, _, p = tp.rpartition("-")
            loads[member] += weights[int(p)] if topic == "orders" else 1.0
    expected = [f"{n:,}" for n in summary["counts"].values()]
    expected += [f"{x:,.6g}" for x in loads.values()]
    assert_whole(result.output, expected, width)
    names_whole(result.output, [*group["members"], "payments-eu-west-1[", "roundrobin"])


@pytest.mark.parametrize("width", WIDTHS)
def test_cluster_tables_fit(width: int) -> None:
    brokers = tuple(range(0, 40))
    view = ClusterView(
        controller=37,
        epoch=1234567,
        brokers=brokers,
        partitions=tuple(
            PartitionView(
                "payments-eu-west-1",
                p,
                (p % 40, (p + 1) % 40, (p + 2) % 40),
                (p + 1) % 40,
                98765 + p,
                ((p + 1) % 40, (p + 2) % 40),
                4321,
            )
            for p in range(12)
        ),
    )
    counts = OpCounts(round_trips=123456, reads=7654321, writes=98765)
    output = rendered(render(view, "after kill:3", counts), width)
    expected = ["1234567", "123456/7654321/98765", "4321", *(str(98765 + p) for p in range(12))]
    expected += [str(b) for b in brokers]
    assert_whole(output, expected, width)
    names_whole(output, [f"payments-eu-west-1-{p}" for p in range(12)])


@pytest.mark.parametrize("width", WIDTHS)
def test_group_run_tables_fit(width: int) -> None:
    members = [
        MemberRow(
            consumer=i,
            member_id=f"consumer-{i}-3f9c2a1e-7b5d-4e8f-9a0b-{i:012d}",
            instance_id=f"demo-i{i}",
            status="stable",
            partitions=[TopicPartition("orders", p) for p in range(i, 300, 4)],
            lag=1234567 + i,
        )
        for i in range(4)
    ]
    rebalances = [
        RebalanceRow(
            generation=987654,
            reason="member consumer-0 left the group (session timeout)",
            rounds=12345,
            duration=101.523,
            unowned=4321,
            partition_seconds=98765.43,
            attempts=55555,
            conflicts=66666,
            store_ops=OpCounts(round_trips=111, reads=2222, writes=33333),
        )
    ]
    snapshot = GroupSnapshot(
        "after crash:0",
        "billing",
        "Stable",
        987654,
        "cooperative-sticky",
        members[1].member_id,
        12,
        members,
        rebalances,
        legacy=True,
    )
    output = rendered(render_snapshot(snapshot), width)
    expected = [str(1234567 + i) for i in range(4)] + ["987654", "12345", "101.523", "4321"]
    expected += ["98765.43", "55555", "66666", "111/2222/33333"]
    expected += [str(p) for p in range(0, 300, 4)]
    assert_whole(output, expected, width)
    names_whole(output, ["cooperative-sticky", *(m.member_id for m in members)])


@pytest.mark.parametrize("width", WIDTHS)
def test_plugins_table_fits(width: int) -> None:
    result = CliRunner().invoke(cli, ["plugins"], env={"COLUMNS": str(width)})
    document = CliRunner().invoke(cli, ["plugins", "--format", "json"])
    assert result.exit_code == document.exit_code == 0
    plugins = json.loads(document.output)
    assert_whole(result.output, [p["version"] for p in plugins if p["version"]], width)
    for p in plugins:
        names_whole(result.output, [p["name"], p["module"]])
        for registered in p["registered"].values():
            names_whole(result.output, registered)  # listed, broken between names only


STRATEGIES = ("cooperative-sticky", "range", "roundrobin", "sticky", "uniform", "weighted-sticky")
METRICS = {
    "count_balance": ("partitions", "lower", "Which balances partition counts best?"),
    "topic_balance": ("partitions", "lower", None),
    "load_balance": ("ratio", "lower", "Which balances load best?"),
    "moved": ("partitions", "lower", "Which moves least?"),
    "moved_min": ("partitions", "lower", None),
    "revoked": ("partitions", "lower", "Which revokes least?"),
    "rounds": ("rounds", "lower", None),
    "assign_ms": ("ms", "lower", "Which is fastest?"),
}


def lab_summary() -> dict[str, object]:
    rows = []
    for w, workload in enumerate(("kafka-grid", "single-partition-topics", "zipf-load")):
        for s, strategy in enumerate(STRATEGIES):
            for m, metric in enumerate(METRICS):
                rows.append(
                    {
                        "workload": workload,
                        "strategy": strategy,
                        "metric": metric,
                        "mean": 101.5 + 1000 * w + 100 * s + m + 0.25,
                    }
                )
    info = {
        name: {
            "description": name,
            "unit": unit,
            "better": better,
            "headline": headline,
            "kinds": [],
        }
        for name, (unit, better, headline) in METRICS.items()
    }
    return build_report_data({"preset": "quick", "seed": 7}, info, {"summary": rows})


@pytest.mark.parametrize("width", WIDTHS)
def test_lab_key_table_fits(width: int) -> None:
    """Issue 12: `lab run` / `lab show`: today numbers are cut (`101.…`) and strategy names too
    (`coope…`), even at 120."""
    data = lab_summary()
    output = rendered(key_table(data), width)
    expected = set()
    shown = key_metrics(data)
    assert "topic_balance" not in shown  # no headline: not a key metric
    for row in data["tables"]["summary"]:  # type: ignore[index]
        if row["metric"] not in shown:
            continue
        unit = METRICS[row["metric"]][0]
        value = row["mean"]
        expected.add(
            f"{value:.3f}"
            if unit == "ratio"
            else f"{value:,.0f}"
            if unit == "ms"
            else f"{value:,.2f}"
        )
    assert_whole(output, sorted(expected), width)
    names_whole(output, STRATEGIES)
