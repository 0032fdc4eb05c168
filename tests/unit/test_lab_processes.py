"""coordkit.lab.processes and the broker hosts, the parts the real-clients and share-groups
workloads share: the producer's log read back, a broker host refusing a bad broker config in one
line, and its bootstrap read from what it printed (the runs themselves: tests/lab and
tests/share)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from coordkit.lab.processes import (
    BrokerHost,
    LabProcess,
    acknowledged,
    drain,
    lab_broker_configs,
)


def test_the_producers_log_gives_the_acknowledged_records_and_their_send_times() -> None:
    lines = ["a 0 1 0 100.5", "a 1 0 0 100.75", "e 2 timeout", "a 3 1", ""]
    assert acknowledged(lines) == {0: 100.5, 1: 100.75}


def test_drain_returns_once_every_acknowledged_record_is_received(tmp_path: Path) -> None:
    log = tmp_path / "producer.log"
    log.write_text("a 0 0 0 1.0\na 1 0 1 1.5\n")
    asked: list[int] = []

    def received() -> set[int]:
        asked.append(1)
        return {0, 1} if len(asked) > 2 else {0}

    drain(log, received, timeout=30)
    assert len(asked) == 3


def test_the_lab_configs_are_brokers_configs_coordkit_serve_honours() -> None:
    from coordkit.serve.broker_config import parse_broker_configs

    configs = parse_broker_configs(lab_broker_configs(brokers=3, factor=2))
    engine = configs.engine_config()
    assert engine.group_initial_rebalance_delay == 0.5
    assert engine.group_min_session_timeout == 0.1
    assert engine.offsets_topic_num_partitions == 6
    assert engine.offsets_topic_replication_factor == 2


def test_a_bad_broker_config_stops_the_serve_host_in_one_line_with_status_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "coordkit.lab.serve_host", "2", "t", "2", "2",
         "group.share.record.lock.duration.ms=soon"],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "group.share.record.lock.duration.ms=soon" in line


def test_the_hosts_bootstrap_lists_its_brokers_in_id_order(tmp_path: Path) -> None:
    script = "print('broker 1 127.0.0.1:9093'); print('broker 0 127.0.0.1:9092'); print('ready')"
    process = LabProcess("brokers", ["-c", script], tmp_path)
    process.process.wait(60)
    host = BrokerHost(process, "coordkit")
    assert host.addresses == {0: "127.0.0.1:9092", 1: "127.0.0.1:9093"}
    assert host.bootstrap == "127.0.0.1:9092,127.0.0.1:9093"
    process.kill()
