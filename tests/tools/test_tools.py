"""Kafka's command-line tools (the fetched 4.4 jars, unchanged) and kcat (Debian's package)
against Kafka 4.4 (KRaft) and ``coordkit serve`` on the store under test, three brokers each: the
script of ``commands.py`` in order on both, each command's outcome compared (issue #35 item 4).

* A command whose api coordkit does not advertise must be refused by the tool naming that api
  (Kafka's clients' UnsupportedVersionException), and the refusal is a difference the table
  below holds.
* Every difference of a command's normalised outcome (``runner.py``) is covered by a ``cli.<name>``
  row of the table "Where `coordkit serve` differs from Kafka 4.x" (docs/serve.md), and a row no
  difference needs fails the stale-row check.
* A command known to fail on coordkit because of a handler's defect is a strict xfail naming the
  defect on the stores it shows on (``Command.defect``, ``defect_stores``: ``conftest.py``), until
  it is fixed.

``-m "not slow"`` takes the commands marked ``default`` (one or two per tool, under a minute
with the Kafka cluster's start); ``tox -e py311-tools`` runs every command on memory, ZooKeeper
and Redis (not the default run: its budget).
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from coordkit.testing.servers import KafkaCluster
from differential.harness import (
    Difference,
    KnownDifference,
    differences,
    known_differences,
    stale_rows,
)
from tools.commands import BY_NAME, SCRIPT
from tools.conftest import ServeUnderTest
from tools.runner import Command, Outcome, api_key_name, run_script

FAMILY = "cli."
#: Kafka's outcomes, once for the session (the same script whatever store coordkit is on).
KAFKA_OUTCOMES: dict[str, Outcome] = {}
#: Each command's differences, as the tests find them (for the stale-row check).
FOUND: dict[str, list[Difference]] = {}


def _param(run: Command) -> object:
    marks = [] if run.default else [pytest.mark.slow]
    return pytest.param(run.name, marks=marks, id=run.name)


def _selected(request: pytest.FixtureRequest) -> list[Command]:
    """The commands this session runs: the ones selected and the default ones (the others'
    first steps)."""
    names = {
        item.callspec.params["name"]
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.originalname == "test_command"
        and item.path == Path(__file__)
    }
    return [run for run in SCRIPT if run.default or run.name in names]


def _play(script: list[Command], bootstrap: str) -> dict[str, Outcome]:
    with tempfile.TemporaryDirectory(prefix="coordkit-tools-") as scratch:
        return run_script(script, bootstrap, Path(scratch))


@pytest.fixture(scope="module")
def outcomes(
    request: pytest.FixtureRequest, kafka: KafkaCluster, coordkit: ServeUnderTest
) -> dict[str, dict[str, Outcome]]:
    """The script on coordkit, and on Kafka the first time (both side by side)."""
    script = _selected(request)
    with ThreadPoolExecutor(2) as pool:
        on_kafka = None if KAFKA_OUTCOMES else pool.submit(_play, script, kafka.bootstrap)
        mine = _play(script, coordkit.bootstrap)
        if on_kafka is not None:
            KAFKA_OUTCOMES.update(on_kafka.result())
    return {"kafka": KAFKA_OUTCOMES, "coordkit": mine}


@pytest.fixture(scope="module")
def differs() -> list[KnownDifference]:
    return [row for row in known_differences()
            if all(p.startswith(FAMILY) for p in row.scenarios)]  # fmt: skip


@pytest.mark.parametrize("name", [_param(run) for run in SCRIPT])
def test_command(
    name: str,
    outcomes: dict[str, dict[str, Outcome]],
    coordkit: ServeUnderTest,
    differs: list[KnownDifference],
) -> None:
    run = BY_NAME[name]
    kafka, mine = outcomes["kafka"][name], outcomes["coordkit"][name]
    unserved = [api for api in run.needs if api not in coordkit.api_versions]
    if unserved:
        said = mine.output()
        refused = (f"{run.label}: coordkit does not serve {', '.join(unserved)}, but the tool "
                   f"did not say so:\n{said}")  # fmt: skip
        assert "not support" in said, refused
        assert any(api_key_name(a) in said for a in unserved), refused
    found = differences(f"{FAMILY}{name}", kafka.normalised(run), mine.normalised(run))
    FOUND[name] = found
    unexplained = [d for d in found if not any(row.covers(d) for row in differs)]
    assert not unexplained, "\n".join(
        [
            f"{run.label} (store {coordkit.store}): differences docs/serve.md's table does "
            "not list:",
            *map(str, unexplained),
            f"== Kafka (exit {kafka.status})\n{kafka.output()}",
            f"== coordkit (exit {mine.status})\n{mine.output()}",
        ]
    )


def test_no_cli_row_of_the_table_is_stale(differs: list[KnownDifference]) -> None:
    stale = stale_rows(differs, FAMILY, BY_NAME, FOUND)
    assert not stale, "rows of the table that no difference needs:\n" + "\n".join(stale)
