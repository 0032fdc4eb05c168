"""``coordkit configs --entity-type users``: SCRAM credentials as ``kafka-configs.sh`` sets them.

``--alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'`` (iterations
4096 when not given, as Kafka's ``ConfigCommand``) writes ``/config/users/<user>`` with the
credential Kafka 3.9 writes (salt, stored key, server key, iterations; the password itself is
never stored) and its change notification; ``--delete-config SCRAM-SHA-256`` removes one;
``--describe`` lists the mechanisms and iterations, never the keys. A password never appears in
a message.
"""

from __future__ import annotations

import click

from coordkit.cli.configs.changes import parse_added, parse_deleted
from coordkit.cli.errors import CommandError
from coordkit.plugins import open_store
from coordkit.serve.listeners.scram import (
    CONFIG_USERS,
    DEFAULT_ITERATIONS,
    HASHES,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_iterations,
    new_credential,
    read_user_configs,
    write_user_configs,
)
from coordkit.store.tree import children
from coordkit.support.terminal import visible

USERS = "users"


def _credential(mechanism: str, text: str) -> ScramCredential:
    """``iterations=N,password=P`` (the brackets already dropped) into a credential."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in ("iterations", "password"):
            raise CommandError(
                f"--add-config {mechanism}: give [iterations=N,password=P] (the password, and "
                "the iterations if not 4096)"
            )
        fields[key.strip()] = value
    if not fields.get("password"):
        raise CommandError(f"--add-config {mechanism}: no password given")
    iterations_text = fields.get("iterations", str(DEFAULT_ITERATIONS)).strip()
    if not iterations_text.isdigit():
        raise CommandError(f"--add-config {mechanism}: iterations={iterations_text!r} is not "
                           "a whole number")  # fmt: skip
    iterations = int(iterations_text)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise CommandError(f"--add-config {mechanism}: iterations {iterations} is outside "
                           f"{MIN_ITERATIONS}-{MAX_ITERATIONS}")  # fmt: skip
    return new_credential(mechanism, fields["password"], iterations)


def alter_user(store_url: str, user: str, add: str | None, delete: str | None) -> None:
    """Set or remove ``user``'s SCRAM credentials."""
    added, deleted = parse_added(add), parse_deleted(delete)
    if not added and not deleted:
        raise CommandError("--alter needs --add-config or --delete-config")
    for name in [*added, *deleted]:
        if name not in HASHES:
            option = "--add-config" if name in added else "--delete-config"
            raise CommandError(f"{option} {name}: a user's configs here are SCRAM credentials "
                               f"({', '.join(HASHES)})")  # fmt: skip
    credentials = {name: _credential(name, text).to_text() for name, text in added.items()}
    with open_store(store_url) as store:
        config = read_user_configs(store, user)
        for name in deleted:
            if config.pop(name, None) is None:
                raise CommandError(f"--delete-config {name}: user {user} has no such credential")
        write_user_configs(store, user, {**config, **credentials})
    click.echo(visible(f"Completed updating config for user {user}."))


def describe_users(store_url: str, user: str | None) -> None:
    """Each user's SCRAM mechanisms and iterations, as kafka-configs prints them."""
    from urllib.parse import unquote

    with open_store(store_url, read_only=True) as store:
        names = [user] if user is not None else sorted(
            unquote(name) for name in children(store, CONFIG_USERS)
        )  # fmt: skip
        for name in names:
            shown = [f"{mechanism}=iterations={iterations}"
                     for mechanism, iterations in credential_iterations(store, name).items()]  # fmt: skip
            if shown or user is not None:
                click.echo(visible(f"SCRAM credential configs for user-principal '{name}' are "
                                   f"{', '.join(shown)}"))  # fmt: skip
