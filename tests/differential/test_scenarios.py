"""The scenario differential (issue #31): every scenario played against Kafka 4.4 (KRaft) and
``coordkit serve``, three brokers each, the normalised responses compared field by field.

A difference fails its scenario unless a row of the table "Where `coordkit serve` differs from
Kafka 4.x" (docs/serve.md) covers it (the scenario and the field path match the row's patterns); a
row that no longer covers any difference fails :func:`test_no_row_of_the_table_is_stale`.
"""

from __future__ import annotations

import pytest

from differential import harness
from differential.clusters import Clusters
from differential.harness import (
    SCENARIOS,
    Difference,
    KnownDifference,
    differences,
    highest_common_versions,
    known_differences,
    record,
    renamed,
)
from differential.scenarios import (
    acls,
    admin,
    compaction,
    configs,
    consumer_group_apis,
    consumer_groups,
    durability,
    frames,
    groups,
    groups_by_id,
    metadata,
    quotas,
    records,
    retention,
    share_fetch,
    share_groups,
    topic_ids,
    transactions,
    txn_offsets,
    txn_verification,
)

#: The scenario modules, by API family (imported for their registrations).
FAMILIES = {"metadata": metadata, "topics": metadata, "records": records, "groups": groups,
            "frames": frames, "consumer_groups": consumer_groups,
            "consumer_group_apis": consumer_group_apis, "topic_ids": topic_ids,
            "groups_by_id": groups_by_id, "durability": durability,
            "retention": retention, "admin": admin, "compaction": compaction,
            "configs": configs, "acls": acls, "quotas": quotas,
            "transactions": transactions, "share_groups": share_groups,
            "share_fetch": share_fetch}  # fmt: skip
#: Modules adding scenarios to a family above (imported for their registrations).
MORE_OF_A_FAMILY = (txn_offsets, txn_verification)
#: The salt of a Kafka side's second run (its names apart from the first's).
RETRY_SALT = "r"
#: Each scenario's differences, as the module's tests find them (for the stale-row check).
FOUND: dict[str, list[Difference]] = {}


#: The table's rows of the real programs compared (``test_client_recordings.py``,
#: ``test_kafka_tools.py``, and ``tests/tools``: ``cli.`` for Kafka's tools and kcat,
#: ``adminclient.`` for confluent-kafka's AdminClient), which those modules hold, by the start of
#: their scenario patterns.
PROGRAM_FAMILIES = ("clients.", "tools.", "cli.", "adminclient.")


@pytest.fixture(scope="module")
def table() -> list[KnownDifference]:
    return [
        row
        for row in known_differences()
        if not all(p.startswith(PROGRAM_FAMILIES) for p in row.scenarios)
    ]


def test_every_scenario_belongs_to_a_family() -> None:
    assert len(SCENARIOS) >= 80
    assert {run.family for run in SCENARIOS.values()} == set(FAMILIES)
    for run in SCENARIOS.values():
        assert run.doc, f"scenario {run.name} says what it does"


#: Apis whose later versions are brokers' requests: a scenario speaking as a client declares
#: the highest client version instead (AddPartitionsToTxn v4+ is a partition leader's
#: verification with the coordinator, KIP-890).
CLIENT_VERSIONS = {"AddPartitionsToTxn": 3}


def test_scenarios_use_the_highest_versions_both_sides_serve(clusters: Clusters) -> None:
    """Each scenario's declared versions are the highest both clusters advertise (or, for a
    client's form of a broker's api, the highest client version), unless it says why not (an
    unknown version, a removed one, a malformed frame)."""
    common = highest_common_versions(clusters.kafka.api_versions, clusters.coordkit.api_versions)
    wrong = {
        run.name: {
            api: (version, common.get(api))
            for api, version in run.versions.items()
            if version not in (common.get(api), CLIENT_VERSIONS.get(api))
        }
        for run in SCENARIOS.values()
        if run.older_versions is None
    }
    assert {name: found for name, found in wrong.items() if found} == {}
    assert set(harness.HELPER_VERSIONS.items()) <= set(common.items())


#: The transaction scenarios run in their own env (py311-transactions, marker
#: ``transactions``), out of the default run's budget.
#: The share-group scenarios run in py311-share (marker ``share``), the client-quota ones in
#: py311-tools with kafka-configs' quota commands (marker ``quotas``).
SCENARIO_PARAMS = [
    pytest.param(name, marks=pytest.mark.transactions) if name.startswith("transactions.")
    else pytest.param(name, marks=pytest.mark.share)
    if name.startswith(("share_groups.", "share_fetch."))
    else pytest.param(name, marks=pytest.mark.quotas) if name.startswith("quotas.")
    else name
    for name in sorted(SCENARIOS)
]  # fmt: skip


@pytest.mark.parametrize("name", SCENARIO_PARAMS)
def test_scenario(name: str, clusters: Clusters, table: list[KnownDifference]) -> None:
    run = SCENARIOS[name]
    kafka = record(run, clusters.kafka.side(run))
    coordkit = record(run, clusters.coordkit.side(run))
    # A scenario whose own checks fail on both sides (a helper's wait, an undeclared version)
    # records the same "AssertionError" twice, which would compare equal: it compares nothing.
    assert not (kafka.raised == coordkit.raised == "AssertionError"), (
        f"the scenario failed on both sides:\nkafka: {kafka.detail}\ncoordkit: {coordkit.detail}"
    )
    found = differences(name, kafka.as_data(), coordkit.as_data())
    unexplained = [d for d in found if not any(row.covers(d) for row in table)]
    if unexplained and kafka.raised is None:
        # Kafka's side once more, alone, under names of its own: its timing on a loaded
        # machine (a coordinator's metadata image trailing a topic's creation by a moment) can
        # change what a scenario records. coordkit's recording stays the one compared, so a
        # difference Kafka shows twice still fails.
        again_side = clusters.kafka.side(run, salt=RETRY_SALT)
        again = record(run, again_side)
        plain = clusters.kafka.side(run).prefix
        retried = differences(name, renamed(again.as_data(), again_side.prefix, plain),
                              coordkit.as_data())  # fmt: skip
        if not [d for d in retried if not any(row.covers(d) for row in table)]:
            found, unexplained = retried, []
    FOUND[name] = found
    raised = [f"{side}: {r.detail}" for side, r in (("kafka", kafka), ("coordkit", coordkit))
              if r.raised]  # fmt: skip
    assert not unexplained, "\n".join(
        ["differences the table of docs/serve.md does not list:", *map(str, unexplained), *raised]
    )


def test_no_row_of_the_table_is_stale(table: list[KnownDifference]) -> None:
    """Every row covers a difference found, among the scenarios it names that ran (a run of
    a few scenarios judges only the rows all of whose scenarios ran)."""
    stale = []
    for row in table:
        covered = [name for name in SCENARIOS if row.covers_scenario(name)]
        if not covered:
            stale.append(f"{row} (names no scenario)")
        elif all(name in FOUND for name in covered) and not any(
            row.covers(d) for name in covered for d in FOUND[name]
        ):
            stale.append(str(row))
    assert not stale, "rows of the table that no difference needs:\n" + "\n".join(stale)


def test_a_second_kafka_run_reads_as_the_first(clusters: Clusters) -> None:
    """The retry of :func:`test_scenario` compares a Kafka run made under salted names as if
    made under the scenario's own: on a scenario whose answers name its topic, the two runs
    read the same, and the salted names are gone."""
    run = SCENARIOS["metadata.missing_topic_auto_created"]
    first = record(run, clusters.kafka.side(run, salt="s1"))
    salted = clusters.kafka.side(run, salt="s2")
    second = record(run, salted)
    plain = clusters.kafka.side(run, salt="s1").prefix
    assert second.raised is None, second.detail
    assert renamed(second.as_data(), salted.prefix, plain) == first.as_data()
    assert salted.prefix not in repr(renamed(second.as_data(), salted.prefix, plain))
    assert plain in repr(first.as_data())
