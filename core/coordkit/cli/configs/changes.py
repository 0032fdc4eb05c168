"""``--add-config`` and ``--delete-config`` as ``kafka-configs.sh`` reads them, and the checks
DescribeConfigs' validators make (:mod:`coordkit.serve.config_catalogue`), each refusal one line
naming the option and the config.

``--add-config 'k1=v1,k2=[a,b],k3=v3'``: pairs separated by commas outside square brackets; a
value in brackets is a list (its commas kept, the brackets dropped), as Kafka's
``ConfigCommand.parseConfigsToBeAdded`` reads it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from coordkit.cli.errors import CommandError
from coordkit.engine.configs import TOPICS
from coordkit.serve.config_catalogue import BROKER_KEYS, TOPIC_KEYS, InvalidConfigValueError

#: A comma that separates two pairs: one not inside ``[...]`` (Kafka's own pattern).
_PAIR_SEPARATOR = re.compile(r",(?=[^\]]*(?:\[|$))")


def parse_added(text: str | None, option: str = "--add-config") -> dict[str, str]:
    """``k=v,k2=[a,b]`` into ``{k: v, k2: "a,b"}``."""
    if text is None:
        return {}
    added: dict[str, str] = {}
    for pair in _PAIR_SEPARATOR.split(text):
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise CommandError(f"{option} {pair!r}: every config to add is key=value")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        if not value.isprintable():
            raise CommandError(f"{option} {name}: the value holds unprintable characters")
        if name in added:
            raise CommandError(f"{option} {name}: given twice")
        added[name] = value
    return added


def parse_deleted(text: str | None, option: str = "--delete-config") -> list[str]:
    """``k1,k2`` into ``[k1, k2]``."""
    if text is None:
        return []
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise CommandError(f"{option} {text!r}: an empty config name")
    return names


def check(entity_type: str, added: Mapping[str, str], deleted: list[str]) -> None:
    """Kafka's checks: a topic config's name and value; a broker config Kafka cannot change
    without a restart, or a bad value of a known one (other broker names are kept, as Kafka 4.4
    keeps them)."""
    both = sorted(set(added) & set(deleted))
    if both:
        raise CommandError(f"--add-config and --delete-config both name {', '.join(both)}")
    keys = TOPIC_KEYS if entity_type == TOPICS else BROKER_KEYS
    for name in [*added, *deleted]:
        key = keys.get(name)
        option = "--add-config" if name in added else "--delete-config"
        if key is None:
            if entity_type == TOPICS:
                raise CommandError(f"{option} {name}: Unknown topic config name: {name}")
            continue
        if entity_type != TOPICS and key.read_only:
            raise CommandError(
                f"{option} {name}: Cannot update this config dynamically (Kafka reads it at the "
                "start)"
            )
        if name in added:
            try:
                key.parse(added[name])
            except InvalidConfigValueError as exc:
                raise CommandError(f"--add-config {name}: {exc}") from None
