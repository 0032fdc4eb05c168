"""Issue 12: what README.md promises, checked against what runs.

* "The README's first Python snippet (`memory://demo`, a children watch) exits before the watch
  fires and prints nothing": the snippet, run as written in its own interpreter, prints what the
  sentence after it says it prints.
* "The README names every Debian package `bash run test` installs (see `run`), says `bash run
  lab` installs only the `spark` extra and how to add the others, and shows the `coordkit assign`
  input format": read from ``run`` and ``pyproject.toml``, looked for in the README, and the
  input example (now on the command line's page, docs/cli.md) assigned by ``coordkit assign``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from click.testing import CliRunner

from coordkit.cli import cli
from coordkit.strategies.assignment_io import loads_group
from harness.docs import code_block, page

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
RUN = (ROOT / "run").read_text()


def _function(name: str) -> str:
    match = re.search(rf"^{name}\(\) \{{\n(.*?)^\}}", RUN, re.M | re.S)
    assert match, f"run lost its {name} function"
    return match.group(1)


def test_the_first_python_example_prints_what_the_readme_says() -> None:
    """Issue 12: the first Python snippet (`memory://demo`, a children watch) exits before the
    watch fires and prints nothing: make the example show what it promises."""
    start = README.index("```python\n") + len("```python\n")
    end = README.index("```", start)
    snippet = README[start:end]
    assert "memory://demo" in snippet
    assert "watch_children" in snippet
    promise = re.search(r"It prints (.*?)\.\n", README[end:])
    assert promise, "the README no longer says what the example prints"
    expected = re.findall(r"`([^`]*)`", promise.group(1))
    assert expected
    done = subprocess.run(
        [sys.executable, "-c", snippet], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected


def test_the_readme_names_every_debian_package_run_test_installs() -> None:
    """Issue 12: the README names every Debian package `bash run test` installs."""
    line = re.search(r"^\s*apt_install (.+)$", _function("cmd_test"), re.M)
    assert line
    packages = line.group(1).split()
    assert {"zookeeper", "redis-server", "chromium", "openssl"} <= set(packages)
    intro = README[: README.index("# coordkit")]
    for package in packages:
        assert f"`{package}`" in intro, package


def test_the_readme_says_run_lab_installs_only_the_spark_extra_and_how_to_add_others() -> None:
    """Issue 12: says `bash run lab` installs only the `spark` extra and how to add the others."""
    installed = re.findall(r"-e '\.\[([^\]]+)\]'", _function("cmd_lab"))
    assert installed == ["spark"]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    # `testing` (the conformance kit's pytest and hypothesis) has nothing to add to the lab.
    others = sorted(set(extras) - {"spark", "all", "testing"})
    intro = README[: README.index("# coordkit")]
    lab = intro[intro.index("`bash run lab`") :]
    assert "`spark` extra only" in lab
    command = re.search(r"`(\.venv/bin/pip install -e '\.\[([^\]]+)\]')`", lab)
    assert command, "the README no longer says how to add the other extras"
    assert sorted(command.group(2).split(",")) == others


def test_the_docs_show_the_assign_input_format_and_it_assigns() -> None:
    """Issue 12: the README shows the `coordkit assign` input format (the command line's page
    does, since the reference moved to the documentation)."""
    example = code_block(page("cli.md"), "`coordkit assign`", "json").text
    group = loads_group(example)
    assert group.members
    assert group.topics
    result = CliRunner().invoke(cli, ["assign", "--format", "json"], input=example)
    assert result.exit_code == 0, result.output
    handed_out = json.loads(result.output)["assignment"]
    assert sum(len(v) for v in handed_out.values()) == sum(
        meta.partitions for meta in group.topics.values()
    )
