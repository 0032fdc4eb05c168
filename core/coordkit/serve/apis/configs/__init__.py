"""Kafka's config apis on ``coordkit serve``, on the configs of Kafka's ZooKeeper layout
(:mod:`coordkit.engine.configs`):

* :mod:`.describe` — DescribeConfigs;
* :mod:`.alter` — AlterConfigs, IncrementalAlterConfigs;
* :mod:`.values` — a config's value, source and synonyms, as Kafka works them out.

:data:`CONFIG_APIS` is what the dispatcher serves: api name → (lowest, highest version, handler).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from coordkit.protocol import Request
from coordkit.serve.apis.configs import alter, describe
from coordkit.serve.context import BrokerContext

ConfigHandler = Callable[[BrokerContext, Request], Awaitable[Any]]

CONFIG_APIS: dict[str, tuple[int, int, ConfigHandler]] = {
    "DescribeConfigs": (*describe.VERSIONS, describe.handle_describe_configs),
    "AlterConfigs": (*alter.ALTER_VERSIONS, alter.handle_alter_configs),
    "IncrementalAlterConfigs": (
        *alter.INCREMENTAL_VERSIONS,
        alter.handle_incremental_alter_configs,
    ),
}

__all__ = ["CONFIG_APIS"]
