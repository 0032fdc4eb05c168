"""``coordkit delete-node``: delete one node, as ``zkCli``'s ``delete`` does, on any store.

It is how an operator clears a node the cluster cannot read and leaves alone: an unreadable
``/controller`` or ``/controller_epoch`` stops every controller election until it is gone, and
the error that says so names this command. The node is deleted at the version read, so a node
that changed meanwhile is not deleted unseen.
"""

from __future__ import annotations

import click

from coordkit.cli.admin.options import store_option
from coordkit.cli.errors import CommandError
from coordkit.errors import BadVersionError, NotEmptyError
from coordkit.plugins import open_store
from coordkit.store import Delete, paths
from coordkit.support.terminal import visible


@click.command("delete-node")
@store_option
@click.argument("path")
def delete_node_command(store_url: str, path: str) -> None:
    """Delete the node PATH (one without children), e.g. an unreadable /controller_epoch."""
    paths.validate(path)
    with open_store(store_url) as store:
        data, stat = store.get(path)
        try:
            store.commit([Delete(path, stat.version)])
        except BadVersionError:
            raise CommandError(
                f"{path} changed while it was being deleted; look at it again "
                f"(coordkit tree {path})"
            ) from None
        except NotEmptyError:
            raise CommandError(
                f"{path} has {stat.num_children} child node(s); delete-node deletes one node"
            ) from None
    click.echo(visible(f"deleted {path} (version {stat.version}, {len(data):,} bytes)"))
