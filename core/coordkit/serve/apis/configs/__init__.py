"""Kafka's config apis on ``coordkit serve``, on the configs of Kafka's ZooKeeper layout
(:mod:`coordkit.engine.configs`):

* :mod:`.describe` — DescribeConfigs;
* :mod:`.alter` — AlterConfigs, IncrementalAlterConfigs;
* :mod:`.groups` — Kafka 4's GROUP and CLIENT_METRICS resources;
* :mod:`.quotas` — DescribeClientQuotas, AlterClientQuotas;
* :mod:`.listing` — ListConfigResources;
* :mod:`.values` — a config's value, source and synonyms, as Kafka works them out.

:data:`CONFIG_APIS` is what the dispatcher serves: api name → (lowest, highest version, handler).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from coordkit.protocol import Request
from coordkit.serve.apis.configs import alter, describe, listing, quotas
from coordkit.serve.context import BrokerContext

ConfigHandler = Callable[[BrokerContext, Request], Awaitable[Any]]

CONFIG_APIS: dict[str, tuple[int, int, ConfigHandler]] = {
    "DescribeConfigs": (*describe.VERSIONS, describe.handle_describe_configs),
    "AlterConfigs": (*alter.ALTER_VERSIONS, alter.handle_alter_configs),
    "IncrementalAlterConfigs": (
        *alter.INCREMENTAL_VERSIONS,
        alter.handle_incremental_alter_configs,
    ),
    "DescribeClientQuotas": (*quotas.VERSIONS, quotas.handle_describe_client_quotas),
    "AlterClientQuotas": (*quotas.VERSIONS, quotas.handle_alter_client_quotas),
    "ListConfigResources": (*listing.VERSIONS, listing.handle_list_config_resources),
}

__all__ = ["CONFIG_APIS"]
