"""confluent-kafka's AdminClient (librdkafka) against Kafka 4.4 (KRaft) and ``coordkit serve`` on
the store under test: the calls of ``admin_client.py`` in order on both, each answer compared as
plain data (issue #35 item 4).

As for the tools (``test_tools.py``): a call whose api coordkit does not advertise must come back
unsupported; every difference is covered by an ``adminclient.<name>`` row of docs/serve.md's table
"Where `coordkit serve` differs from Kafka 4.x", and a row no difference needs is stale; a known
handler defect is a strict xfail.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from coordkit.testing.servers import KafkaCluster
from differential.harness import (
    Difference,
    KnownDifference,
    differences,
    known_differences,
    stale_rows,
)
from tools.admin_client import BY_NAME, SCRIPT, AdminCall, run_in_process
from tools.conftest import ServeUnderTest

FAMILY = "adminclient."
KAFKA_ANSWERS: dict[str, Any] = {}
FOUND: dict[str, list[Difference]] = {}


def _param(call: AdminCall) -> object:
    marks = [] if call.default else [pytest.mark.slow]
    return pytest.param(call.name, marks=marks, id=call.name)


def _selected(request: pytest.FixtureRequest) -> tuple[AdminCall, ...]:
    names = {
        item.callspec.params["name"]
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.originalname == "test_admin_call"
        and item.path == Path(__file__)
    }
    return tuple(call for call in SCRIPT if call.default or call.name in names)


@pytest.fixture(scope="module")
def answers(
    request: pytest.FixtureRequest, kafka: KafkaCluster, coordkit: ServeUnderTest
) -> dict[str, dict[str, Any]]:
    calls = _selected(request)
    with ThreadPoolExecutor(2) as pool:
        on_kafka = None if KAFKA_ANSWERS else pool.submit(run_in_process, calls, kafka.bootstrap)
        mine = run_in_process(calls, coordkit.bootstrap)
        if on_kafka is not None:
            KAFKA_ANSWERS.update(on_kafka.result())
    return {"kafka": KAFKA_ANSWERS, "coordkit": mine}


@pytest.fixture(scope="module")
def differs() -> list[KnownDifference]:
    return [row for row in known_differences()
            if all(p.startswith(FAMILY) for p in row.scenarios)]  # fmt: skip


@pytest.mark.parametrize("name", [_param(call) for call in SCRIPT])
def test_admin_call(
    name: str,
    answers: dict[str, dict[str, Any]],
    coordkit: ServeUnderTest,
    differs: list[KnownDifference],
) -> None:
    call = BY_NAME[name]
    kafka, mine = answers["kafka"][name], answers["coordkit"][name]
    for side, answer in (("Kafka", kafka), ("coordkit", mine)):
        assert not (isinstance(answer, dict) and "crashed" in answer), f"{side}: {answer}"
    unserved = [api for api in call.needs if api not in coordkit.api_versions]
    if unserved:
        assert "UNSUPPORTED" in json.dumps(mine), (
            f"{call.method}: coordkit does not serve {', '.join(unserved)}, but the call did "
            f"not come back unsupported: {mine}"
        )
    found = differences(f"{FAMILY}{name}", kafka, mine)
    FOUND[name] = found
    unexplained = [d for d in found if not any(row.covers(d) for row in differs)]
    assert not unexplained, "\n".join(
        [
            f"AdminClient.{call.method} (store {coordkit.store}): differences docs/serve.md's "
            "table does not list:",
            *map(str, unexplained),
            f"== Kafka\n{json.dumps(kafka, indent=1, default=str)}",
            f"== coordkit\n{json.dumps(mine, indent=1, default=str)}",
        ]
    )


def test_no_adminclient_row_of_the_table_is_stale(differs: list[KnownDifference]) -> None:
    stale = stale_rows(differs, FAMILY, BY_NAME, FOUND)
    assert not stale, "rows of the table that no difference needs:\n" + "\n".join(stale)
