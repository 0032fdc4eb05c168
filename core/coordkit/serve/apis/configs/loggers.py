"""BROKER_LOGGER resources: the process's loggers as a Kafka broker lists its log4j loggers.

DescribeConfigs lists ``root`` and every ``coordkit`` logger with its effective level in log4j's
names (WARNING is ``WARN``, CRITICAL ``FATAL``), source DYNAMIC_BROKER_LOGGER_CONFIG;
IncrementalAlterConfigs sets a logger's level (SET) or gives it back to its parent's (DELETE), at
once and for the whole process (its brokers share Python's loggers), never stored, as Kafka's
``Log4jController`` changes a broker's. Refusals are Kafka 4.4's, codes and messages.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from coordkit.serve import errors
from coordkit.serve.apis.configs.errors import RefusedError

#: Kafka's ConfigSource id of a logger's level.
DYNAMIC_BROKER_LOGGER_CONFIG = 6
ROOT = "root"
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATIONS = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
#: log4j's levels by name, as Python's numbers (TRACE below DEBUG).
LEVELS = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}  # fmt: skip


def level_name(level: int) -> str:
    """A Python level as log4j names it (the nearest log4j level at or below it)."""
    found = [name for name, number in LEVELS.items() if number <= level]
    return max(found, key=LEVELS.__getitem__) if found else "TRACE"


def loggers() -> dict[str, logging.Logger]:
    """``root`` and every ``coordkit`` logger of the process."""
    out = {ROOT: logging.getLogger()}
    for name, found in sorted(logging.Logger.manager.loggerDict.items()):
        if name.split(".")[0] == "coordkit" and isinstance(found, logging.Logger):
            out[name] = found
    return out


def describe_loggers(broker_id: int, name: str, wanted: Callable[[str], bool]) -> list[
    tuple[str, str]
]:  # fmt: skip
    """``(logger, level)`` of each logger ``wanted`` takes.

    :raises RefusedError: an empty broker name or another broker's id (INVALID_REQUEST).
    """
    if not name:
        raise RefusedError(errors.INVALID_REQUEST, "Broker id must not be empty")
    if name != str(broker_id):
        raise RefusedError(
            errors.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker_id} but received {name}",
        )
    return [(logger_name, level_name(logger.getEffectiveLevel()))
            for logger_name, logger in loggers().items() if wanted(logger_name)]  # fmt: skip


def alter_loggers(broker_id: int, name: str, configs: Sequence[Any], validate_only: bool) -> None:
    """Check every change of ``configs`` (IncrementalAlterConfigs' entries), then, unless
    ``validate_only``, make them.

    :raises RefusedError: with Kafka's code and message; nothing changed.
    """
    if not name.isdigit():
        raise RefusedError(errors.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}")
    if int(name) != broker_id:
        raise RefusedError(
            errors.INVALID_REQUEST, f"Unexpected node id. Expected {broker_id}, but received {name}"
        )
    known = loggers()
    for config in configs:
        operation = config.config_operation
        if operation in _OPERATIONS:
            raise RefusedError(
                errors.INVALID_REQUEST,
                f"{_OPERATIONS[operation]} operation is not allowed for the BROKER_LOGGER resource",
            )
        if config.name not in known:
            raise RefusedError(errors.INVALID_CONFIG, f"Logger {config.name} does not exist!")
        if operation == DELETE and config.name == ROOT:
            raise RefusedError(
                errors.INVALID_REQUEST, "Removing the log level of the root logger is not allowed"
            )
        if operation == SET and config.value not in LEVELS:
            raise RefusedError(
                errors.INVALID_CONFIG,
                f"Cannot set the log level of {config.name} to {config.value} as it is not a "
                f"supported log level. Valid log levels are {', '.join(sorted(LEVELS))}",
            )
    if validate_only:
        return
    for config in configs:
        level = LEVELS[config.value] if config.config_operation == SET else logging.NOTSET
        known[config.name].setLevel(level)
