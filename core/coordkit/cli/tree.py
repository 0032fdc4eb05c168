"""``coordkit tree``: the store's nodes with their decoded values, like ``zkCli ls -R`` plus ``get``."""

from __future__ import annotations

import json
import os
from typing import Any

import attrs
import click
from rich.console import Console
from rich.markup import escape
from rich.tree import Tree

from coordkit import paths
from coordkit.errors import LayoutError, NoNodeError
from coordkit.layout import codec_for
from coordkit.plugins import open_store
from coordkit.store import MetadataStore, Stat

DEFAULT_STORE_ENV = "COORDKIT_STORE"


@attrs.frozen
class NodeView:
    path: str
    stat: Stat
    text: str  # the value shown
    kind: str | None  # Kafka node kind, when the path is part of Kafka's layout
    problem: str | None  # why the value does not match Kafka's schema


def describe_value(path: str, data: bytes) -> tuple[str, str | None, str | None]:
    """Render a node value: JSON as compact text, other bytes as text or hex."""
    codec = codec_for(path)
    problem = None
    if codec is not None:
        try:
            codec.decode(data, path)
        except LayoutError as exc:
            problem = str(exc)
    if not data:
        return "", codec.name if codec else None, problem
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return (
            "0x" + data[:64].hex() + ("…" if len(data) > 64 else ""),
            codec.name if codec else None,
            problem,
        )
    try:
        text = json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    except json.JSONDecodeError:
        pass
    return text, codec.name if codec else None, problem


def walk(store: MetadataStore, root: str, depth: int | None = None) -> list[NodeView]:
    """Read ``root`` and its descendants breadth-first, one pipelined read per level."""
    paths.validate(root)
    out: list[NodeView] = []
    level = [root]
    current_depth = 0
    while level:
        results = store.get_many(level)
        next_level: list[str] = []
        for path, result in zip(level, results, strict=True):
            if isinstance(result, Exception):
                if isinstance(result, NoNodeError) and path != root:
                    continue  # deleted while we walked
                raise result
            data, stat = result
            text, kind, problem = describe_value(path, data)
            out.append(NodeView(path, stat, text, kind, problem))
            if stat.num_children and (depth is None or current_depth < depth):
                try:
                    next_level.extend(paths.join(path, name) for name in store.children(path))
                except NoNodeError:
                    pass
        level = next_level
        current_depth += 1
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
@click.option("--depth", type=click.IntRange(min=0), help="Stop this many levels below PATH.")
@click.option(
    "--format", "fmt", type=click.Choice(["tree", "json"]), default="tree", show_default=True
)
@click.argument("path", default="/")
def tree_command(store_url: str, depth: int | None, fmt: str, path: str) -> None:
    """Print the nodes under PATH with their values (Kafka's JSON decoded and checked)."""
    with open_store(store_url) as store:
        views = walk(store, path, depth)
    if fmt == "json":
        click.echo(json.dumps({v.path: _as_json(v) for v in views}, indent=2, ensure_ascii=False))
        return
    _print_tree(views, path, store_url)


def _as_json(view: NodeView) -> dict[str, Any]:
    try:
        value: Any = json.loads(view.text) if view.text else None
    except json.JSONDecodeError:
        value = view.text
    out: dict[str, Any] = {
        "value": value,
        "version": view.stat.version,
        "ephemeral": view.stat.ephemeral,
    }
    if view.kind:
        out["kind"] = view.kind
    if view.problem:
        out["problem"] = view.problem
    return out


def _print_tree(views: list[NodeView], root: str, store_url: str) -> None:
    console = Console(width=int(os.environ.get("COLUMNS", "0")) or None)
    branches: dict[str, Tree] = {}
    top: Tree | None = None
    for view in views:
        label = escape(view.path if view.path == root else paths.basename(view.path))
        if view.stat.ephemeral:
            label += " [magenta](ephemeral)[/]"
        if view.text:
            label += f"  [green]{escape(view.text)}[/]"
        if view.problem:
            label += f"  [red]malformed: {escape(view.problem)}[/]"
        if top is None:
            top = branches[view.path] = Tree(label)
            continue
        parent = branches.get(paths.parent(view.path), top)
        branches[view.path] = parent.add(label)
    if top is not None:
        console.print(top)
