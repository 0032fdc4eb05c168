"""What the command-line tests share: a whole store read node by node (to show a refused command
wrote nothing) and the one ``error:`` line a refusal prints."""

from __future__ import annotations

from click.testing import Result

from coordkit.store import MetadataStore, paths

#: path → (data, version, ephemeral owner) of every node.
Snapshot = dict[str, tuple[bytes, int, int]]


def snapshot(store: MetadataStore) -> Snapshot:
    """Every node with its data, version and owner: what "nothing written" compares."""
    out: Snapshot = {}
    stack = ["/"]
    while stack:
        path = stack.pop()
        data, stat = store.get(path)
        out[path] = (data, stat.version, stat.ephemeral_owner)
        stack.extend(paths.join(path, name) for name in store.children(path))
    return out


def one_error_line(result: Result) -> str:
    """The refusal's single ``error: ...`` line (exit status 2, no traceback)."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]
