"""The core and plugin discovery work with none of the optional clients installed.

Each check runs in a fresh interpreter in which importing kazoo, redis or pyspark fails, so it
holds whatever this environment has installed (and in tox's py311-bare env they are truly absent).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "core" / "coordkit"
OPTIONAL = ("kazoo", "redis", "pyspark")

BLOCKER = textwrap.dedent(
    """
    import sys
    class _Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {blocked!r}:
                raise ImportError(f"No module named {{name!r}} (blocked for this test)")
            return None
    sys.meta_path.insert(0, _Blocker())
    """
).format(blocked=set(OPTIONAL))


def run_without_extras(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_core_source_never_imports_optional_clients() -> None:
    offenders = []
    for source in CORE.rglob("*.py"):
        tree = ast.parse(source.read_text(), str(source))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{source.name}:{node.lineno} imports {n}"
                for n in names
                if n.split(".")[0] in OPTIONAL
            ]
    assert not offenders, offenders


def test_every_core_module_imports_without_extras() -> None:
    modules = sorted(
        "coordkit." + ".".join(p.relative_to(CORE).with_suffix("").parts)
        for p in CORE.rglob("*.py")
        if p.name != "__init__.py"
    )
    result = run_without_extras(
        f"""
        import importlib, sys
        for name in {modules!r}:
            importlib.import_module(name)
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {OPTIONAL!r})
        assert not loaded, loaded
        print("ok", len({modules!r}))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")


def test_plugin_discovery_and_cli_work_without_extras() -> None:
    result = run_without_extras(
        """
        from coordkit.cli import main
        main(["plugins", "--format", "json"])
        """
    )
    assert result.returncode == 0, result.stderr
    assert '"memory"' in result.stdout


def test_memory_store_works_without_extras() -> None:
    result = run_without_extras(
        """
        from coordkit import open_store
        with open_store("memory://") as store:
            store.create("/a", b"1")
            print(store.get("/a")[0].decode())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


@pytest.mark.parametrize(
    ("url", "extra"),
    [
        ("zookeeper://127.0.0.1:1/x", "zookeeper"),
        ("redis://127.0.0.1:1/0", "redis"),
        ("rediss://127.0.0.1:1/0", "redis"),
    ],
)
def test_asking_for_a_backend_without_its_client_names_the_extra(url: str, extra: str) -> None:
    result = run_without_extras(
        f"""
        from coordkit import open_store
        from coordkit.errors import MissingDependencyError
        try:
            open_store({url!r})
        except MissingDependencyError as exc:
            print(exc)
        else:
            raise SystemExit("no MissingDependencyError")
        """
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert (
        f"pip install coordkit[{extra}]" in result.stdout
        or f"pip install 'coordkit[{extra}]'" in result.stdout
    )
