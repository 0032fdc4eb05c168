"""Every range / roundrobin / sticky_fresh case of the shared Kafka vectors, through the registry."""

from __future__ import annotations

from typing import Any

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.assignment import GroupSubscription, MemberSubscription
from harness.vectors import kafka_vectors

#: vector section → registered assignor name
SECTIONS = {"range": "range", "roundrobin": "roundrobin", "sticky_fresh": "sticky"}


def load_cases() -> list[Any]:
    vectors = kafka_vectors()
    return [
        pytest.param(SECTIONS[section], case, id=f"{section}-{case['id']}")
        for section in SECTIONS
        for case in vectors[section]
    ]


@pytest.mark.parametrize(("assignor_name", "case"), load_cases())
def test_vector(assignor_name: str, case: dict[str, Any]) -> None:
    static = case.get("static", {})
    group = GroupSubscription(
        case["partitions"],
        {
            m: MemberSubscription(topics, instance_id=static.get(m))
            for m, topics in case["subs"].items()
        },
    )
    assignment = get_plugin_manager().assignor(assignor_name).assign(group)
    # Expected lists are sets: order within a member is not part of the contract.
    got = {m: sorted(ps) for m, ps in assignment.as_strings().items()}
    assert got == {m: sorted(ps) for m, ps in case["expected"].items()}
    assert not assignment.has_withheld
