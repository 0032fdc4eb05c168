"""AlterUserScramCredentials and DescribeUserScramCredentials as Kafka 3.9's ZooKeeper-mode
broker answers them (``ZkAdminManager``): credentials written to ``/config/users/<user>`` (with a
change notification), checked whole before anything is written for a user. Under an authorizer,
describing needs Describe on the cluster and altering Alter on it: else CLUSTER_AUTHORIZATION_FAILED
as Kafka's error responses carry it (top-level and for each user asked; for each user named,
nothing written)."""

from __future__ import annotations

import hashlib
import hmac
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from coordkit.kafka.acls import AclOperation
from coordkit.protocol import Request, messages
from coordkit.serve.authorization import CLUSTER_AUTHORIZATION_FAILED, cluster_allowed
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.listeners.scram import (
    CONFIG_USERS,
    HASHES,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_iterations,
    read_user_configs,
    write_user_configs,
)
from coordkit.store.tree import children

Handler = Callable[[BrokerContext, Request], Awaitable[Any]]

UNSUPPORTED_SASL_MECHANISM = 33
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
#: Kafka's ``ScramMechanism`` types on the wire.
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF = {name: code for code, name in MECHANISM_TYPES.items()}

AlterResponse = messages.AlterUserScramCredentialsResponse
DescribeResponse = messages.DescribeUserScramCredentialsResponse


def _credential(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """The credential of a client's salted password (the client salts; Kafka's
    ``ScramCredentialUtils`` keys)."""
    digest = HASHES[mechanism]
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(), server_key, iterations)


def _alter_refused(body: Any) -> Any:
    """Kafka's error response: every user named, in name order, refused."""
    Result = nested(AlterResponse, "AlterUserScramCredentialsResult")
    users = sorted({c.name for c in (*body.deletions, *body.upsertions)})
    # Kafka's ApiError.fromThrowable leaves a generic message out: null.
    return AlterResponse(throttle_time_ms=0, results=[
        Result(user=u, error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=None)
        for u in users])  # fmt: skip


async def handle_alter_user_scram_credentials(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return _alter_refused(body)
    changes = [(d.name, d.mechanism, None) for d in body.deletions] + [
        (u.name, u.mechanism, u) for u in body.upsertions
    ]
    twice = Counter((name, mech) for name, mech, _ in changes)
    errors: dict[str, tuple[int, str]] = {}
    for name, mech, upsert in changes:
        if name in errors:
            continue
        if not name:
            errors[name] = (UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech not in MECHANISM_TYPES:
            errors[name] = (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif twice[(name, mech)] > 1:
            errors[name] = (DUPLICATE_RESOURCE,
                            "A user credential cannot be altered twice in the same request")  # fmt: skip
        elif upsert is not None and upsert.iterations < MIN_ITERATIONS:
            errors[name] = (UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif upsert is not None and upsert.iterations > MAX_ITERATIONS:
            errors[name] = (UNACCEPTABLE_CREDENTIAL, "Too many iterations")

    def apply() -> dict[str, tuple[int, str]]:
        store = ctx.broker.store
        users = dict.fromkeys(name for name, _, _ in changes if name not in errors)
        for user in users:
            config = read_user_configs(store, user)
            failed = None
            for name, mech, upsert in changes:
                if name != user:
                    continue
                mechanism = MECHANISM_TYPES[mech]
                if upsert is None:
                    if config.pop(mechanism, None) is None:
                        failed = (RESOURCE_NOT_FOUND,
                                  "Attempt to delete a user credential that does not exist")  # fmt: skip
                else:
                    config[mechanism] = _credential(mechanism, upsert.salt,
                                                    upsert.salted_password,
                                                    upsert.iterations).to_text()  # fmt: skip
            if failed is not None:
                errors[user] = failed
                continue
            write_user_configs(store, user, config)
        return errors

    found = await ctx.blocking(apply)
    names = dict.fromkeys(name for name, _, _ in changes)
    Result = nested(AlterResponse, "AlterUserScramCredentialsResult")
    results = []
    for name in names:
        code, message = found.get(name, (0, None))
        results.append(Result(user=name, error_code=code, error_message=message))
    return AlterResponse(throttle_time_ms=0, results=results)


async def handle_describe_user_scram_credentials(ctx: BrokerContext, request: Request) -> Any:
    asked = request.body.users
    Result = nested(DescribeResponse, "DescribeUserScramCredentialsResult")
    Info = nested(DescribeResponse, "CredentialInfo")
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        # Kafka's error response: a result per user asked, without the user's name, and no
        # message (ApiError.fromThrowable leaves a generic one out).
        return DescribeResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                                error_message=None, results=[
            Result(user="", error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=None,
                   credential_infos=[])
            for _ in asked or []])  # fmt: skip

    def read() -> list[Any]:
        store = ctx.broker.store
        stored = (unquote(name) for name in children(store, CONFIG_USERS))
        names = [u.name for u in asked] if asked else sorted(stored)
        results = []
        for name in dict.fromkeys(names):
            infos = [Info(mechanism=TYPE_OF[mechanism], iterations=iterations)
                     for mechanism, iterations in credential_iterations(store, name).items()]  # fmt: skip
            if infos:
                results.append(Result(user=name, error_code=0, error_message=None,
                                      credential_infos=infos))  # fmt: skip
            elif asked:
                results.append(Result(
                    user=name, error_code=RESOURCE_NOT_FOUND, credential_infos=[],
                    error_message="Attempt to describe a user credential that does not exist",
                ))  # fmt: skip
        return results

    results = await ctx.blocking(read)
    return DescribeResponse(throttle_time_ms=0, error_code=0, error_message=None, results=results)


SCRAM_USER_APIS: dict[str, tuple[int, int, Handler]] = {
    "DescribeUserScramCredentials": (0, 0, handle_describe_user_scram_credentials),
    "AlterUserScramCredentials": (0, 0, handle_alter_user_scram_credentials),
}
