"""Authorizers (kind ``authorizer``): ``kafka``, Kafka's ``AclAuthorizer`` rules over ACLs kept in
Kafka's ZooKeeper layout (:mod:`coordkit_authorizers.kafka`). ``authorizer.class.name`` names one
(Kafka's class names name ``kafka``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit import hookimpl
from coordkit_authorizers.kafka import KAFKA


@hookimpl
def coordkit_register_authorizers(register: Callable[[Any], None]) -> None:
    register(KAFKA)
