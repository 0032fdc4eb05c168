"""A small tree in Kafka's layout, and running the ``coordkit`` command in-process, for tests that
check what commands read and that they leave a store as they found it."""

from __future__ import annotations

import pytest

from coordkit.cli import main
from coordkit.kafka import layout
from coordkit.kafka.model import BrokerInfo, ConsumerOffset, PartitionState, TopicAssignment
from coordkit.store import MetadataStore


def populate(store: MetadataStore) -> None:
    """A small Kafka tree: a broker, a topic with a partition state, a legacy group's offset."""
    store.create(
        layout.broker_path(0),
        layout.BROKER.encode(BrokerInfo("h0", 9092, "1700000000000")),
        make_parents=True,
    )
    store.create(
        layout.topic_path("t"), layout.TOPIC.encode(TopicAssignment({0: (0,)})), make_parents=True
    )
    store.create(
        layout.partition_state_path("t", 0),
        layout.PARTITION_STATE.encode(
            PartitionState(leader=0, leader_epoch=1, isr=(0,), controller_epoch=1)
        ),
        make_parents=True,
    )
    store.create(
        layout.consumer_offset_path("g", "t", 0),
        layout.CONSUMER_OFFSET.encode(ConsumerOffset(5)),
        make_parents=True,
    )


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``coordkit ARGV`` through its console entry point: ``(exit status, stdout, stderr)``."""
    code = 0
    try:
        main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
