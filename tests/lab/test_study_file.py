"""Study files (``coordkit lab run --workload-file``): the lab page's example as written, the
effective study round-tripping, wrong input refused in one line naming the file and the field,
``--out`` kept for one study, and a real Spark run reproduced from the ``study.json`` it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coordkit.errors import UnknownNameError
from coordkit.lab import LabError
from coordkit.plugins import PluginManager, get_plugin_manager
from coordkit_assignors.lab.events import MemberCrashed, MemberJoined, PartitionsAdded
from coordkit_lab.pipeline import only_metrics
from coordkit_lab.runner import ERROR_METRIC, MAX_ROW_PARAM_CHARS, row_params, run_scenario
from coordkit_lab.scenarios import DEFAULT_SEED
from coordkit_lab.study import (
    MAX_STUDY_BYTES,
    STUDY_FILE,
    Study,
    StudyError,
    load_study,
    preset_selection,
    refuse_other_study,
    run_info,
    study_json,
    study_selection,
    with_overrides,
    write_study,
)
from harness.docs import code_block, page
from harness.kafka_tree import run


def documented_study() -> str:
    """The study file of the lab's page (docs/lab.md), as written."""
    return code_block(page("lab.md"), "Your own cluster and study files", "toml").text


@pytest.fixture(scope="module")
def manager() -> PluginManager:
    return get_plugin_manager()


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def assignors(manager: PluginManager) -> list[str]:
    return manager.assignors.names()


MINIMAL = """
[topics]
t0 = 3
t1 = 2

[members.C0]
topics = ["t0", "t1"]

[members.C1]
topics = ["t0"]
"""

GROUPS = {
    "name": "two groups",
    "strategies": ["range", "sticky"],
    "topics": {
        "orders": {"partitions": 4, "loads": [1, 2, 3, 4]},
        "audit": 2,
        "unused": 9,
    },
    "events": [{"kind": "add-partitions", "topic": "orders", "count": 2}],
    "groups": {
        "billing": {
            "members": {"b0": {"topics": ["orders"]}, "b1": {"topics": ["orders"]}},
            "events": [{"kind": "leave", "member": "b0"}],
        },
        "archive": {
            "members": {"a0": {"topics": ["audit", "orders"], "rack": "r1"}},
            "events": [
                {"kind": "join", "member": "a1", "topics": ["audit"], "instance_id": "s1"},
                {"kind": "create-topic", "topic": "new", "partitions": 3, "subscribers": ["a1"]},
            ],
        },
    },
}


# -- the lab page's example, as written ------------------------------------------------------------


def test_the_documented_example_parses_and_every_scenario_runs(
    tmp_path: Path, manager: PluginManager
) -> None:
    study = load_study(write(tmp_path, "study.toml", documented_study()), manager)
    assert study.name == "orders"
    assert study.strategies == ("cooperative-sticky", "range", "weighted-sticky")
    assert study.seed == 7
    assert study.replicates == 1
    assert study.metrics == ("assign_ms", "count_balance", "load_balance", "moved", "revoked")
    (group,) = study.groups
    assert [m.name for m in group.members] == ["C0", "C1"]
    assert group.members[1].instance_id == "billing-1"
    assert [type(e) for e in group.events] == [MemberJoined, PartitionsAdded, MemberCrashed]
    assert study.topics["orders"].loads == (5.0, 1.0, 1.0, 2.0, 8.0, 1.0)
    assert study.topics["orders"].replica_racks is not None
    specs = study.specs(manager)
    assert sorted(s.strategy for s in specs) == list(study.strategies)
    assert {s.workload for s in specs} == {"study"}
    assert len({s.seed for s in specs}) == 1  # paired: every strategy meets the same scenario
    for spec in specs:
        rows = run_scenario(spec, manager)
        assert all(row[12] != ERROR_METRIC for row in rows), rows[:1]
        assert sorted({row[7] for row in rows}) == [0, 1, 2, 3]  # initial + three events
        partitions = {row[7]: row[11] for row in rows}
        assert partitions[0] == 10
        assert partitions[2] == 12


# -- the effective study ---------------------------------------------------------------------------


def test_the_effective_study_round_trips(tmp_path: Path, manager: PluginManager) -> None:
    for name, content in (
        ("documented.toml", documented_study()),
        ("groups.json", json.dumps(GROUPS)),
        ("minimal.toml", MINIMAL),
    ):
        study = load_study(write(tmp_path, name, content), manager)
        out = tmp_path / f"out-{name}"
        out.mkdir()
        written = write_study(study, out)
        assert written == out / STUDY_FILE
        again = load_study(written, manager)
        assert again == study, name
        assert study_json(again) == written.read_text()
        assert again.sha256() == study.sha256()


def test_defaults_are_filled_in_and_recorded(tmp_path: Path, manager: PluginManager) -> None:
    study = load_study(write(tmp_path, "minimal.toml", MINIMAL), manager)
    assert study.name == "minimal"
    assert list(study.strategies) == assignors(manager)
    assert study.seed == DEFAULT_SEED
    assert study.replicates == 1
    assert "count_balance" in study.metrics
    assert "moved_excess" in study.metrics
    assert all("assignment" in manager.metric(m).kinds for m in study.metrics)
    document = json.loads(study_json(study))
    assert document["strategies"] == assignors(manager)
    assert document["seed"] == DEFAULT_SEED
    assert document["events"] == []
    assert len(study.specs(manager)) == len(assignors(manager))  # no events: one assignment each


def test_toml_and_json_say_the_same(tmp_path: Path, manager: PluginManager) -> None:
    from_toml = load_study(write(tmp_path, "s.toml", documented_study()), manager)
    import tomllib

    from_json = load_study(
        write(tmp_path, "s.json", json.dumps(tomllib.loads(documented_study()))), manager
    )
    assert from_json == from_toml


def test_groups_share_topics_and_take_the_top_level_events_first(
    tmp_path: Path, manager: PluginManager
) -> None:
    study = load_study(write(tmp_path, "g.json", json.dumps(GROUPS)), manager)
    assert [g.name for g in study.groups] == ["billing", "archive"]
    billing, archive = study.groups
    assert [e.kind for e in billing.events] == ["add-partitions", "leave"]
    assert [e.kind for e in archive.events] == ["add-partitions", "join", "create-topic"]
    assert set(study.case(billing).topics) == {"orders"}  # a group's case: the topics it uses
    assert set(study.case(archive).topics) == {"orders", "audit"}
    specs = study.specs(manager)
    assert len(specs) == 2 * 2
    assert {json.loads(json.loads(s.params)["case"])["group"] for s in specs} == {
        "billing",
        "archive",
    }
    document = json.loads(study_json(study))
    assert "members" not in document
    assert set(document["groups"]) == {"billing", "archive"}


def test_command_line_choices_override_the_file(tmp_path: Path, manager: PluginManager) -> None:
    study = load_study(write(tmp_path, "s.toml", documented_study()), manager)
    changed = with_overrides(study, manager, strategies=["sticky", "range"], seed=3, replicates=2)
    assert changed.strategies == ("range", "sticky")
    assert (changed.seed, changed.replicates) == (3, 2)
    assert changed.groups == study.groups
    assert with_overrides(study, manager) is study
    with pytest.raises(UnknownNameError, match="unknown strategy 'nosuch'"):
        with_overrides(study, manager, strategies=["nosuch"])


# -- wrong input -----------------------------------------------------------------------------------

BASE = 'strategies = ["range"]\n[topics]\nt0 = 2\n[members.C0]\ntopics = ["t0"]\n'

WRONG: list[tuple[str, str | bytes, str]] = [
    (
        "bad.toml",
        'name = "x"\nseed = = 7\n',
        "not valid TOML (Invalid value (at line 2, column 8))",
    ),
    ("unknown.toml", "colour = 1\n" + BASE, "colour: unknown field (allowed: name, description,"),
    ("type.toml", 'seed = "7"\n' + BASE, "seed: expected a whole number, got a string"),
    (
        "date.toml",
        "seed = 1979-05-27\n" + BASE,
        "seed: expected a whole number, got a date or time",
    ),
    (
        "bool.toml",
        "replicates = true\n" + BASE,
        "replicates: expected a whole number, got a boolean",
    ),
    ("zero.toml", "replicates = 0\n" + BASE, "replicates: 0 is not in the range 1 <= x <= 1,000"),
    (
        "undefined.toml",
        '[topics]\nt0 = 1\nt1 = 1\n[members.C0]\ntopics = ["t0", "t1", "t9"]\n',
        "members.C0.topics[2]: topic 't9' is not defined (topics: t0, t1)",
    ),
    (
        "load.toml",
        '[topics.t0]\npartitions = 2\nloads = [1, -1]\n[members.C0]\ntopics = ["t0"]\n',
        "topics.t0.loads[1]: load must be a non-negative number, got -1",
    ),
    (
        "inf.toml",
        '[topics.t0]\npartitions = 1\nloads = [inf]\n[members.C0]\ntopics = ["t0"]\n',
        "topics.t0.loads[0]: load must be a non-negative number, got inf",
    ),
    (
        "big.toml",
        "seed = 99999999999999999999999\n" + BASE,
        "seed: the integer is outside TOML's 64-bit range",
    ),
    ("deep.json", "[" * 100 + "]" * 100, "nested deeper than 64 levels"),
    ("deep.toml", "a = " + "[" * 70 + "]" * 70 + "\n", "nested deeper than 64 levels"),
    ("deeper.toml", "a = " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 64 levels"),
    (
        "twice.json",
        '{"topics": {"t0": 1, "t0": 2}, "members": {"C0": {"topics": ["t0"]}}}',
        "topics.t0: given more than once",
    ),
    ("latin1.toml", b'name = "caf\xe9"\n', "not UTF-8 (byte 11 is 0xe9)"),
    ("bom.json", b"\xef\xbb\xbf{}", "starts with a byte order mark"),
    ("study.yaml", "topics: {}", "a study file is TOML (.toml) or JSON (.json), not '.yaml'"),
    (
        "strategy.toml",
        BASE.replace('["range"]', '["range", "nosuch"]'),
        "strategies[1]: unknown strategy 'nosuch'; available: cooperative-sticky, range",
    ),
    ("nostrategy.toml", BASE.replace('["range"]', "[]"), "strategies: name at least one strategy"),
    ("metric.toml", 'metrics = ["moved", "leader_skew"]\n' + BASE, "metrics[1]: unknown metric"),
    (
        "owned.toml",
        BASE + 'owned = ["t0-0"]\n',
        "members.C0.owned: not part of a study (step 0 assigns the group from scratch)",
    ),
    ("nomembers.toml", "[topics]\nt0 = 1\n", "members: missing (a study needs members"),
    (
        "both.json",
        '{"topics": {"t0": 1}, "members": {"C0": {"topics": ["t0"]}}, "groups": {}}',
        "groups: give either members (one group) or groups, not both",
    ),
    (
        "kind.toml",
        BASE + '[[events]]\nkind = "explode"\n',
        "events[0].kind: unknown event kind 'explode' (kinds: join, leave, crash,",
    ),
    (
        "absent.toml",
        BASE
        + '[[events]]\nkind = "leave"\nmember = "C0"\n[[events]]\nkind = "crash"\nmember = "C0"\n',
        "events[1].member: no member 'C0' in the group at this point",
    ),
    (
        "field.toml",
        BASE + '[[events]]\nkind = "delete-topic"\ntopic = "t0"\ncount = 1\n',
        "events[0].count: unknown field (allowed: kind, topic)",
    ),
    (
        "count.toml",
        BASE + '[[events]]\nkind = "add-partitions"\ntopic = "t0"\ncount = 1.5\n',
        "events[0].count: expected a whole number of partitions >= 1, got 1.5",
    ),
    (
        "limit.toml",
        BASE + '[[events]]\nkind = "add-partitions"\ntopic = "t0"\ncount = 2000000\n',
        "events[0].count: 2,000,000 partitions make 2,000,002 in all, more than the limit",
    ),
    (
        "racks.json",
        '{"topics": {"t0": 1}, "members": {"C0": {"topics": ["t0"]}}, "events": [{"kind": '
        '"create-topic", "topic": "t1", "partitions": 2, "replica_racks": [["a"], [""]]}]}',
        "events[0].replica_racks[1][0]: must not be empty",
    ),
    (
        "group.json",
        '{"topics": {"t0": 1}, "groups": {"g": {"members": {"C0": {"topics": ["t9"]}}}}}',
        "groups.g.members.C0.topics[0]: topic 't9' is not defined",
    ),
]


@pytest.mark.parametrize(
    ("name", "content", "expected"), WRONG, ids=[w[0].replace(".", "-") for w in WRONG]
)
def test_wrong_input_is_one_line_naming_the_file_and_the_field(
    tmp_path: Path, manager: PluginManager, name: str, content: str | bytes, expected: str
) -> None:
    path = write(tmp_path, name, content)
    with pytest.raises(StudyError) as caught:
        load_study(path, manager)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert expected in message


def test_a_file_too_large_is_refused_before_it_is_read(
    tmp_path: Path, manager: PluginManager
) -> None:
    path = tmp_path / "huge.json"
    with open(path, "wb") as target:
        target.truncate(MAX_STUDY_BYTES + 1)
    with pytest.raises(StudyError, match=f"larger than {MAX_STUDY_BYTES:,} bytes"):
        load_study(path, manager)


# -- the command line refuses before anything starts ------------------------------------------------


def test_the_command_refuses_a_bad_file_in_one_line_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = write(
        tmp_path, "study.toml", documented_study().replace('["orders"]', '["orders", "t9"]')
    )
    out = tmp_path / "report"
    code, _stdout, err = run(capsys, "lab", "run", "--workload-file", str(bad), "--out", str(out))
    assert code == 2
    assert err.strip().splitlines() == [
        f"error: {bad}: members.C1.topics[1]: topic 't9' is not defined (topics: audit, orders)"
    ]
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--preset", "churn"], "Invalid value for '--preset': a study (--workload-file"),
        (["-w", "zipf-load"], "Invalid value for '--workloads' / '-w': a study"),
        (["-s", "range,nosuch"], "'--strategies' / '-s': unknown strategy 'nosuch'"),
    ],
)
def test_options_that_do_not_combine_with_a_study_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str], expected: str
) -> None:
    study = write(tmp_path, "study.toml", documented_study())
    out = tmp_path / "report"
    code, _, err = run(
        capsys, "lab", "run", "--workload-file", str(study), "--out", str(out), *extra
    )
    assert code == 2
    assert expected in err
    assert not out.exists()


def test_the_study_workload_alone_is_explained(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "lab", "run", "-w", "study")
    assert code == 2
    assert (
        "workload 'study' runs a given group: use --workload-file FILE or --from-store URL" in err
    )


# -- one report directory, one study ---------------------------------------------------------------


def fake_report(out: Path, run_section: dict[str, Any]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    summary = out / "summary.json"
    summary.write_text(json.dumps({"format": 2, "run": run_section, "metrics": {}, "tables": {}}))
    return summary


def test_out_keeps_a_report_for_its_own_study(tmp_path: Path, manager: PluginManager) -> None:
    study = load_study(write(tmp_path, "s.toml", documented_study()), manager)
    out = tmp_path / "report"
    fake_report(out, {"study": study.name, **run_info(study_selection(study))})
    refuse_other_study(out, study_selection(study))  # the same study again: replaced
    other = with_overrides(study, manager, seed=8)
    with pytest.raises(LabError) as caught:
        refuse_other_study(out, study_selection(other))
    assert str(caught.value) == (
        f"--out {out}: holds the report of another study (seed 7 there, 8 here); pass --force "
        "to replace it, or choose another --out"
    )
    refuse_other_study(out, study_selection(other), force=True)
    grown = load_study(
        write(tmp_path, "s.toml", documented_study().replace("audit = 4", "audit = 5")), manager
    )
    with pytest.raises(LabError, match=r"another study \(the study's topics, groups or events\)"):
        refuse_other_study(out, study_selection(grown))
    preset = preset_selection("quick", study.specs(manager), 7, None)
    with pytest.raises(
        LabError, match=r"another study \(study 'orders' there, preset 'quick' here\)"
    ):
        refuse_other_study(out, preset)


def test_out_refuses_reports_it_cannot_tell_apart(tmp_path: Path) -> None:
    selection = {"preset": "quick", "seed": 1}
    fake_report(tmp_path / "old", {"preset": "quick", "seed": 1})
    with pytest.raises(
        LabError, match="holds a report that does not record its study; pass --force"
    ):
        refuse_other_study(tmp_path / "old", selection)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "summary.json").write_text("[" * 100)
    with pytest.raises(LabError, match=r"holds a summary\.json that is not a lab report"):
        refuse_other_study(tmp_path / "junk", selection)
    refuse_other_study(tmp_path / "empty", selection)  # nothing there yet


def test_the_command_refuses_another_studys_out_before_starting(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, manager: PluginManager
) -> None:
    path = write(tmp_path, "s.toml", documented_study())
    study = load_study(path, manager)
    out = tmp_path / "report"
    summary = fake_report(out, {"study": "orders", **run_info(study_selection(study))})
    before = summary.read_bytes()
    code, _, err = run(
        capsys, "lab", "run", "--workload-file", str(path), "--seed", "9", "--out", str(out)
    )
    assert code == 2
    assert err.strip().splitlines() == [
        f"error: --out {out}: holds the report of another study (seed 7 there, 9 here); pass "
        "--force to replace it, or choose another --out"
    ]
    assert summary.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]


def test_a_study_report_shows_only_its_metrics() -> None:
    tables = {
        "summary": [{"metric": "moved", "mean": 1}, {"metric": "assign_ms", "mean": 2}],
        "errors": [{"workload": "study", "error": "boom"}],
    }
    assert only_metrics(tables, {"moved"}) == {
        "summary": [{"metric": "moved", "mean": 1}],
        "errors": [{"workload": "study", "error": "boom"}],
    }


# -- a real run, and the same run again from the study.json it wrote --------------------------------


def lab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coordkit_lab", "run", "--master", "local[1]", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def means(summary: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {
        (row["strategy"], row["metric"]): row["mean"]
        for row in summary["tables"]["summary"]
        if row["metric"] != "assign_ms"
    }


@pytest.mark.lab_process
def test_a_study_runs_on_spark_and_runs_again_from_its_study_json(
    tmp_path: Path, manager: PluginManager
) -> None:
    source = write(tmp_path, "study.toml", documented_study())
    out = tmp_path / "report"
    first = lab("--workload-file", str(source), "-s", "range,cooperative-sticky", "--out", str(out))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    shown = " ".join(first.stdout.split())  # as printed, lines wrapped to the console
    assert (
        "study orders (1 group, 10 partitions), 2 scenarios (2 strategies × 1 replicate)" in shown
    )
    effective = json.loads((out / STUDY_FILE).read_text())
    assert effective["strategies"] == ["cooperative-sticky", "range"]  # the command line's choice
    assert effective["seed"] == 7
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["study"] == "orders"
    assert summary["run"]["workloads"] == ["study"]
    assert sorted(summary["metrics"]) == list(effective["metrics"])
    assert {row["metric"] for row in summary["tables"]["summary"]} == set(effective["metrics"])

    again = lab(
        "--workload-file", str(out / STUDY_FILE), "--out", str(out)
    )  # same study: no --force
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    repeated = json.loads((out / "summary.json").read_text())
    assert repeated["run"]["selection_id"] == summary["run"]["selection_id"]
    assert means(repeated) == means(summary)
    assert json.loads((out / STUDY_FILE).read_text()) == effective

    before = (out / "summary.json").read_bytes()
    other = lab("--workload-file", str(out / STUDY_FILE), "--seed", "8", "--out", str(out))
    assert other.returncode == 2
    assert "holds the report of another study (seed 7 there, 8 here)" in other.stderr
    assert (out / "summary.json").read_bytes() == before
    loaded: Study = load_study(out / STUDY_FILE, manager)
    assert loaded.strategies == ("cooperative-sticky", "range")


def test_result_rows_carry_a_study_case_by_its_digest(
    tmp_path: Path, manager: PluginManager
) -> None:
    """A study's group travels in ``params``; rows (one per step and metric) name it by digest,
    so a large cluster does not repeat its whole JSON in every Parquet row."""
    short = json.dumps({"members": 3}, sort_keys=True, separators=(",", ":"))
    assert row_params(short) == short
    case_a = "x" * (MAX_ROW_PARAM_CHARS + 1)
    case_b = "y" * (MAX_ROW_PARAM_CHARS + 1)
    shown_a = json.loads(row_params(json.dumps({"case": case_a, "n": 1})))
    shown_b = json.loads(row_params(json.dumps({"case": case_b, "n": 1})))
    assert shown_a["n"] == 1
    assert shown_a["case"].startswith("sha256:")
    assert shown_a["case"].endswith(f"({len(case_a):,} chars)")
    assert shown_a["case"] != shown_b["case"]
    spec = load_study(write(tmp_path, "study.toml", documented_study()), manager).specs(manager)[0]
    assert len(spec.params) > MAX_ROW_PARAM_CHARS
    rows = run_scenario(spec, manager)
    assert rows
    assert all(row[12] != ERROR_METRIC for row in rows)
    assert {row[4] for row in rows} == {row_params(spec.params)}
    assert all(len(row[4]) < MAX_ROW_PARAM_CHARS for row in rows)
