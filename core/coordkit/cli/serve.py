"""``coordkit serve``: engine brokers in this process that real Kafka clients connect to.

``coordkit serve --store URL --brokers 3 --port 9092`` starts brokers 0..2 on the store, each
listening on its own port (9092, 9093, 9094; ``--port 0`` takes any free ones), registered with
that address in ``/brokers/ids/N``, and prints each broker's address. Ctrl-C (or SIGTERM) stops
the listeners and then the brokers, which leave the store as a stopping broker does.

``coordkit serve --store URL --broker-id 3 --port 9095`` runs broker 3 alone: several such
processes on one shared store (ZooKeeper, Redis) form one cluster, its controller elected among
them through the store.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import click
from click.core import ParameterSource

from coordkit.cli.admin.options import WholeNumber, placement_option, placement_strategy
from coordkit.cli.cluster.spec import MAX_BROKERS, shared_store
from coordkit.cli.errors import CommandError
from coordkit.cli.filenames import LocalPath
from coordkit.cli.tree import DEFAULT_STORE_ENV
from coordkit.engine import EngineConfig
from coordkit.engine.strategies import Strategies
from coordkit.errors import UnknownNameError
from coordkit.plugins import get_plugin_manager
from coordkit.serve import SUPPORTED, KafkaServer
from coordkit.serve.authorization import check_authorizer
from coordkit.serve.broker_config import (
    CONFIGS,
    BrokerConfigError,
    parse_broker_configs,
    store_url_for,
)
from coordkit.serve.listeners import (
    SecurityConfigError,
    is_security_config,
    parse_security_configs,
)
from coordkit.store.urls import StoreURL
from coordkit.support.terminal import visible

MAX_PORT = 65_535
#: Kafka's ``broker.id`` is a non-negative int32.
MAX_BROKER_ID = 2**31 - 1
DEFAULT_PORT = 9092
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


class _OneLineCommand(click.Command):
    """Refuses a bad option in one ``error:`` line (click would print the usage first)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise CommandError(exc.format_message()) from None


def _apis() -> str:
    return ", ".join(f"{name} v{lo}-{hi}" for name, (lo, hi, _) in SUPPORTED.items())


def _print_configs(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    for key in CONFIGS.values():
        click.echo(f"{key.name} ({key.type}, default {key.default_text}): {key.doc}")
    ctx.exit()


@click.command("serve", cls=_OneLineCommand)
@click.option(
    "--store",
    "store_url",
    envvar=DEFAULT_STORE_ENV,
    default="memory://",
    show_default=True,
    metavar="URL",
    help=f"Store URL of the cluster (or ${DEFAULT_STORE_ENV}); memory:// lives as long as this "
    "process.",
)
@click.option("--brokers", type=WholeNumber(1, MAX_BROKERS), default=1, show_default=True,
              help="Brokers to run (ids 0 to N-1).")  # fmt: skip
@click.option("--broker-id", type=WholeNumber(0, MAX_BROKER_ID), default=None, metavar="N",
              help="Run broker N alone (one broker per process: start one process per broker "
              "on a shared store to form a cluster); not with --brokers.")  # fmt: skip
@click.option("--port", type=WholeNumber(0, MAX_PORT), default=DEFAULT_PORT, show_default=True,
              help="Port of the first broker; the i-th listens on PORT+i (0: any free port "
              "each).")  # fmt: skip
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on and register (0.0.0.0: every interface, registered "
              "as this machine's name).")  # fmt: skip
@click.option("--auto-create-topics", is_flag=True,
              help="Create a topic a Metadata request names (1 partition, replication factor "
              "1): --config auto.create.topics.enable=true.")  # fmt: skip
@click.option("--config", "config_words", multiple=True, metavar="KEY=VALUE",
              help="A Kafka broker config by Kafka's name, e.g. group.min.session.timeout.ms="
              "6000 (repeatable; --help-configs lists the ones honoured).")  # fmt: skip
@click.option("--help-configs", is_flag=True, is_eager=True, expose_value=False,
              callback=_print_configs, help="List the broker configs --config takes, and exit.")  # fmt: skip
@click.option("--data-dir", type=LocalPath(file_okay=False, path_type=Path), default=None,
              metavar="DIR",
              help="Keep every broker's record logs on disk, broker N's in DIR/broker-N (Kafka's "
              "log.dirs), and load them when started again; default: in memory only.")  # fmt: skip
@click.option("--group-coordinator", default="kafka", show_default=True, metavar="NAME",
              help="Which partition of __consumer_offsets (a group) and of __transaction_state "
              "(a transactional id) holds an id, so which broker coordinates it: kafka (Kafka's "
              "abs(hashCode) % partitions), murmur2, rendezvous or a plugin's. Every process of "
              "a cluster must name the same; Kafka's brokers always use kafka.")  # fmt: skip
@placement_option
def serve_command(
    store_url: str,
    brokers: int,
    broker_id: int | None,
    port: int,
    host: str,
    auto_create_topics: bool,
    config_words: tuple[str, ...],
    data_dir: Path | None,
    group_coordinator: str,
    placement: str,
) -> None:
    """Run brokers that speak Kafka's protocol, on any store.

    Each broker listens on its own TCP port and answers what Kafka's clients need (ApiVersions
    lists it): metadata and topic administration, produce and fetch (every replica keeps its
    records in memory, and on disk with --data-dir; acks 0, 1 and all; idempotent producers)
    and consumer groups.
    """
    source = click.get_current_context().get_parameter_source("brokers")
    if broker_id is not None and source is not ParameterSource.DEFAULT:
        raise CommandError(
            f"--broker-id {broker_id} and --brokers {brokers} exclude each other: --broker-id "
            "runs one broker, --brokers runs brokers 0 to N-1"
        )
    ids = list(range(brokers)) if broker_id is None else [broker_id]
    if port and port + len(ids) - 1 > MAX_PORT:
        raise CommandError(
            f"--port {port}: brokers would listen up to port {port + len(ids) - 1}, "
            f"beyond {MAX_PORT}"
        )
    if auto_create_topics:
        config_words = ("auto.create.topics.enable=true", *config_words)
    # Listeners, TLS and SASL (coordkit.serve.listeners) apart from the other broker configs.
    security_words = [
        (name.strip(), value)
        for name, _, value in (word.partition("=") for word in config_words)
        if is_security_config(name.strip())
    ]
    try:
        configs = parse_broker_configs(
            w for w in config_words if not is_security_config(w.partition("=")[0].strip())
        )
        security = parse_security_configs(security_words, host, port)
    except (BrokerConfigError, SecurityConfigError) as exc:
        raise CommandError(str(exc)) from None
    placement_strategy(placement)
    url = shared_store(store_url)
    shown = StoreURL.parse(url).redacted()
    try:
        url = store_url_for(url, configs)
    except BrokerConfigError as exc:
        raise CommandError(str(exc)) from None
    context = click.get_current_context()
    on_command_line = context.get_parameter_source("store_url") is ParameterSource.COMMANDLINE
    if on_command_line and StoreURL.parse(url).password is not None:
        click.echo(
            "warning: the --store URL holds a password, which other users of this machine can "
            f"read in the process list: give the URL in ${DEFAULT_STORE_ENV} instead",
            err=True,
        )
    _configure_logging()
    try:
        get_plugin_manager().group_coordinator_selection(group_coordinator)
    except UnknownNameError as exc:
        raise CommandError(f"--group-coordinator {group_coordinator!r}: {exc}") from None
    config = configs.engine_config(
        EngineConfig(placement=placement, group_coordinator=group_coordinator)
    )
    # Resolved once here, the edge: the brokers and their coordinators are handed them.
    strategies = Strategies.from_plugins(config)
    for name in config.consumer_group_assignors:
        try:
            strategies.server_assignor(name)
        except UnknownNameError as exc:
            raise CommandError(f"--config group.consumer.assignors: {exc}") from None
    for name in config.share_group_assignors:
        try:
            strategies.share_assignor(name)
        except UnknownNameError as exc:
            raise CommandError(f"--config group.share.assignors: {exc}") from None
    try:
        check_authorizer(strategies, configs.serve_settings().static_configs)
    except BrokerConfigError as exc:
        raise CommandError(str(exc)) from None
    server = KafkaServer(
        url,
        ids,
        host=host,
        port=port,
        settings=configs.serve_settings(),
        config=config,
        data_dir=data_dir,
        strategies=strategies,
        security=security,
    )

    def ready() -> None:
        for served, address in server.addresses.items():
            click.echo(f"broker {served} listening on {visible(str(address))}")
        for bound in server.bound[1:]:
            for served in bound.sockets:
                click.echo(f"listener {bound.config.name} of broker {served} on "
                           f"{visible(str(bound.address(served)))}")  # fmt: skip
        if any(
            lsn.host not in LOOPBACK_HOSTS and not security.authenticates(lsn)
            for lsn in security.listeners
        ):
            click.echo(
                "warning: a listener reachable from other machines does not authenticate its "
                "clients (anyone reaching it may read, write and delete every topic): see "
                "docs/serve.md, Listeners, TLS and SASL",
                err=True,
            )
        if (
            broker_id is not None
            and not server.cluster.admin_store.characteristics.shared_across_processes
        ):
            click.echo(
                f"note: {visible(shown)} is private to this process: broker {broker_id} is a "
                "cluster of its own (other processes need a shared store, e.g. ZooKeeper or "
                "Redis)",
                err=True,
            )
        click.echo(f"store {visible(shown)}; serving {_apis()}; Ctrl-C stops")

    with server.running():
        asyncio.run(server.serve(ready))
    click.echo("stopped")


def _configure_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # fmt: skip
    logging.getLogger("coordkit.serve").setLevel(logging.INFO)
    # A group's lifecycle (a rebalance prepared, a generation stabilized, a member gone) at
    # INFO, as Kafka's group coordinator logs it: what an operator reads after a stuck consumer.
    logging.getLogger("coordkit.engine.groups").setLevel(logging.INFO)
