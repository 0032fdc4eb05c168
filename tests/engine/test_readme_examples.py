"""The documentation's engine examples, taken from its pages as written, run twice in a row on the
same store (the second run finds what the first left: topics, leaders, ISRs, groups, offsets):
the Python example of docs/engine.md and the ``coordkit group`` commands of docs/cli.md, both
marked there as run by this module.

Only the store URL is replaced (the pages name ``zookeeper://localhost:2181/...``; the tests use
the backend under test); everything else is the pages' text.
"""

from __future__ import annotations

import re
import shlex

import pytest
from click.testing import CliRunner

from coordkit.cli import cli
from harness.docs import code_block, page


def _python_example() -> str:
    return code_block(
        page("engine.md"), "The engine: brokers, consumer groups, producers", "python"
    ).text


def _group_commands() -> list[list[str]]:
    """The ``$ coordkit group ...`` commands of the command line's ``coordkit group`` section."""
    block = code_block(page("cli.md"), "`coordkit group`", "console").text
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        if line.startswith("$ coordkit "):
            commands.append(shlex.split(line[2:])[1:])
    assert commands
    return commands


def _with_store(words: list[str], url: str) -> list[str]:
    out = list(words)
    index = out.index("--store")
    out[index + 1] = url
    return out


def test_the_group_cli_example_runs_twice_on_one_store(store_url: str) -> None:
    commands = _group_commands()
    for attempt in (1, 2):
        for words in commands:
            result = CliRunner().invoke(cli, _with_store(words, store_url), env={"COLUMNS": "160"})
            assert result.exit_code == 0, (
                f"run {attempt}: coordkit {' '.join(words)}\n{result.output}"
            )


@pytest.mark.timeout(240)
def test_the_engine_python_example_runs_twice_on_one_store(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _python_example()
    urls = re.findall(r'Cluster\("([^"]+)"', code)
    assert urls, "the example no longer opens a Cluster by URL"
    code = code.replace(urls[0], store_url)
    for _attempt in (1, 2):
        exec(compile(code, "docs/engine.md", "exec"), {"__name__": "docs_example"})
    printed = capsys.readouterr().out
    assert printed.count("generation") >= 2 or printed.count("Stable") >= 2, printed
