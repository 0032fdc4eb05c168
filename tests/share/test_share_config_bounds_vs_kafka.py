"""The share-group broker configs' bounds beside Kafka 4.4's (py311-share): the same sets of
``group.share.*`` configs are accepted or refused by coordkit serve's checks and by Kafka 4.4's
own ``GroupCoordinatorConfig`` and ``ShareGroupConfig`` (ShareConfigBounds.java, run on the
fetched jars), refused for the same reason, and every ``group.share.*`` config both define has
Kafka's default and range."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from coordkit.serve.broker_config import CONFIGS, BrokerConfigError, parse_broker_configs
from coordkit.testing.servers.kafka_tools import KAFKA_KRAFT_VERSION, classpath, require_java

SOURCE = Path(__file__).with_name("ShareConfigBounds.java")

S = "group.share.session.timeout.ms"
H = "group.share.heartbeat.interval.ms"
L = "group.share.record.lock.duration.ms"
CASES: tuple[tuple[str, ...], ...] = (
    (),
    (f"{S}=30000",),
    (f"{S}=70000",),
    (f"{H}=1000",),
    (f"{H}=20000",),
    (f"{S}=6000", "group.share.min.session.timeout.ms=6000"),
    (f"{S}=6000", "group.share.min.session.timeout.ms=6000", f"{H}=1200",
     "group.share.min.heartbeat.interval.ms=1200"),
    ("group.share.min.session.timeout.ms=1000", f"{S}=1000",
     "group.share.min.heartbeat.interval.ms=1000", f"{H}=1000"),
    ("group.share.min.heartbeat.interval.ms=6000", "group.share.max.heartbeat.interval.ms=5500"),
    ("group.share.max.session.timeout.ms=40000",),
    (f"{L}=5000",),
    (f"{L}=70000",),
    (f"{L}=2000", "group.share.min.record.lock.duration.ms=2000"),
    ("group.share.min.record.lock.duration.ms=40000",),
    ("group.share.max.record.lock.duration.ms=20000",),
    ("group.share.delivery.count.limit=11",),
    ("group.share.delivery.count.limit=1",),
    ("group.share.delivery.count.limit=3", "group.share.min.delivery.count.limit=4"),
    ("group.share.delivery.count.limit=9", "group.share.max.delivery.count.limit=8"),
    ("group.share.partition.max.record.locks=5000",),
    ("group.share.partition.max.record.locks=50",),
    ("group.share.partition.max.record.locks=150", "group.share.min.partition.max.record.locks=200"),
    ("group.share.max.size=1001",),
    ("group.share.delivery.count.limit=3", "group.share.min.delivery.count.limit=4", f"{L}=5000"),
)  # fmt: skip


@pytest.fixture(scope="module")
def kafka_answers() -> list[str]:
    """Kafka 4.4's answer to each case, then its ``group.share.*`` definitions."""
    java = require_java()
    lines = [" ".join(case) for case in CASES] + ["defs"]
    done = subprocess.run(
        [java, "-cp", classpath(KAFKA_KRAFT_VERSION), str(SOURCE)],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def _coordkit(case: tuple[str, ...]) -> str:
    try:
        parse_broker_configs(case)
    except BrokerConfigError as exc:
        return str(exc)
    return "ok"


_RANGE = re.compile(r"ConfigException: Invalid value (-?\d+) for configuration (\S+): "
                    r"Value must be (at least|no more than) (-?\d+)")  # fmt: skip


@pytest.mark.parametrize("index", range(len(CASES)), ids=lambda i: " ".join(CASES[i]) or "none")
def test_the_same_configs_are_refused_for_the_same_reason(
    kafka_answers: list[str], index: int
) -> None:
    kafka, ours = kafka_answers[index], _coordkit(CASES[index])
    if kafka == "ok":
        assert ours == "ok"
        return
    assert ours != "ok", f"Kafka 4.4 refuses it ({kafka}); coordkit serve took it"
    assert len(ours.splitlines()) == 1
    if kafka.startswith("IllegalArgumentException: "):
        # coordkit's line gives the values beside the names: without them, Kafka's words.
        assert kafka.removeprefix("IllegalArgumentException: ") in re.sub(r" \(-?\d+\)", "", ours)
        return
    match = _RANGE.fullmatch(kafka)
    assert match, kafka
    value, name, side, bound = match.groups()
    word = "below the minimum" if side == "at least" else "above the maximum"
    assert f"{name}={value}: {value} is {word} of {bound}" in ours


def test_every_share_config_both_define_has_kafkas_default_and_range(
    kafka_answers: list[str],
) -> None:
    defs = kafka_answers[len(CASES) : kafka_answers.index("end")]
    compared = []
    for line in defs:
        _def, name, default, validator = [*line.split(" ", 3), ""][:4]
        key = CONFIGS.get(name)
        if key is None or key.type != "int":
            continue
        bounds = re.fullmatch(r"\[(-?\d+),\.\.\.(?:,(-?\d+))?\]", validator)
        assert bounds, (name, validator)
        low, high = int(bounds.group(1)), bounds.group(2) and int(bounds.group(2))
        assert (key.default, key.at_least, key.at_most) == (int(default), low, high or None), name
        compared.append(name)
    # The bounds and the values they bound, at least.
    assert len(compared) >= 17, compared
