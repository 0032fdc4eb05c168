"""``coordkit tree``: the store's nodes with their decoded values, like ``zkCli ls -R`` plus ``get``."""

from __future__ import annotations

import json
from typing import Any

import attrs
import click
from rich.tree import Tree

from coordkit.cli.errors import CommandError
from coordkit.cli.numbers import Integer
from coordkit.cli.tables import output_console
from coordkit.errors import LayoutError
from coordkit.kafka.layout import codec_for
from coordkit.plugins import open_store
from coordkit.store import MetadataStore, Stat, paths, read_tree
from coordkit.support import jsontext
from coordkit.support.terminal import markup, visible_json

DEFAULT_STORE_ENV = "COORDKIT_STORE"


@attrs.frozen
class NodeView:
    """A node as ``coordkit tree`` shows it.

    :param text: the value shown: JSON compacted, other UTF-8 as it is, other bytes in hex.
    :param value: the value for JSON output: the decoded JSON, else ``text`` (``None`` if empty).
    :param kind: the Kafka node kind, when the path is part of Kafka's layout.
    :param problem: why the value does not match Kafka's schema (or could not be read as JSON).
    """

    path: str
    stat: Stat
    text: str
    kind: str | None
    problem: str | None
    value: Any = None


#: The most characters of a value the tree prints (``--format json`` gives all of it).
SHOWN_CHARS = 500


def read_value(path: str, data: bytes) -> tuple[str, Any, str | None, str | None]:
    """``(text, value, kind, problem)`` of a node value (see :class:`NodeView`): JSON compacted,
    other UTF-8 as it is, other bytes in hex; never raises for what a node holds."""
    codec = codec_for(path)
    kind = codec.name if codec else None
    problem = None
    if codec is not None:
        try:
            codec.decode(data, path)
        except LayoutError as exc:
            problem = str(exc)
    if not data:
        return "", None, kind, problem
    try:
        text = data.decode()
    except UnicodeDecodeError:
        shown = "0x" + data[:64].hex() + ("…" if len(data) > 64 else "")
        return shown, shown, kind, problem
    try:
        value = jsontext.loads(data)
    except jsontext.JSONTextError as exc:
        if codec is None and text.lstrip()[:1] in ("{", "["):
            problem = f"{path}: unreadable JSON: {exc}"
        return text, text, kind, problem
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False), value, kind, problem


def walk(store: MetadataStore, root: str, depth: int | None = None) -> list[NodeView]:
    """``root`` and its descendants (:func:`~coordkit.store.read_tree`) as shown, in path order."""
    out: list[NodeView] = []
    for path, (data, stat) in read_tree(store, root, depth=depth).items():
        text, value, kind, problem = read_value(path, data)
        out.append(NodeView(path, stat, text, kind, problem, value))
    out.sort(key=lambda v: v.path.split("/"))
    return out


@click.command("tree")
@click.option(
    "--store",
    "store_url",
    envvar=DEFAULT_STORE_ENV,
    default="memory://",
    show_default=True,
    help=f"Store URL (or ${DEFAULT_STORE_ENV}).",
)
@click.option("--depth", type=Integer(0), help="Stop this many levels below PATH.")
@click.option(
    "--format", "fmt", type=click.Choice(["tree", "json"]), default="tree", show_default=True
)
@click.argument("path", default="/")
def tree_command(store_url: str, depth: int | None, fmt: str, path: str) -> None:
    """Print the nodes under PATH with their values (Kafka's JSON decoded and checked)."""
    with open_store(store_url, read_only=True) as store:
        views = walk(store, path, depth)
    if fmt == "json":
        document = {v.path: _as_json(v) for v in views}
        click.echo(visible_json(json.dumps(document, indent=2, ensure_ascii=False)))
    else:
        _print_tree(views, path, store_url)
    # As ls does for entries it cannot read: show everything, then say what was wrong, exit 2.
    malformed = [v for v in views if v.problem]
    if malformed:
        more = (
            f" (and {len(malformed) - 1} more node(s), marked above)" if len(malformed) > 1 else ""
        )
        raise CommandError(f"malformed {malformed[0].problem}{more}")


def _as_json(view: NodeView) -> dict[str, Any]:
    out: dict[str, Any] = {
        "value": view.value,
        "version": view.stat.version,
        "ephemeral": view.stat.ephemeral,
    }
    if view.kind:
        out["kind"] = view.kind
    if view.problem:
        out["problem"] = view.problem
    return out


def _print_tree(views: list[NodeView], root: str, store_url: str) -> None:
    console = output_console()
    branches: dict[str, Tree] = {}
    top: Tree | None = None
    for view in views:
        label = markup(view.path if view.path == root else paths.basename(view.path))
        if view.stat.ephemeral:
            label += " [magenta](ephemeral)[/]"
        if view.text:
            label += f"  [green]{markup(_shortened(view.text))}[/]"
        if view.problem:
            label += f"  [red]malformed: {markup(view.problem)}[/]"
        if top is None:
            top = branches[view.path] = Tree(label)
            continue
        parent = branches.get(paths.parent(view.path), top)
        branches[view.path] = parent.add(label)
    if top is not None:
        console.print(top)


def _shortened(text: str) -> str:
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS]}… ({len(text):,} characters; --format json shows all)"
