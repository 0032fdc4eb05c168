"""The README's engine examples, taken from README.md as written, run twice in a row on the same
store (the second run finds what the first left: topics, leaders, ISRs, groups, offsets).

Only the store URL is replaced (the README names ``zookeeper://localhost:2181/...``; the tests use
the backend under test); everything else is the README's text.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from coordkit.cli import cli

README = Path(__file__).resolve().parents[2] / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _python_example() -> str:
    section = _section("The engine: brokers, consumer groups, producers")
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's engine section lost its Python example"
    return match.group(1)


def _group_commands() -> list[list[str]]:
    """The ``$ coordkit group ...`` commands of the README's ``coordkit group`` section."""
    section = _section("Command line")
    block = re.search(r"### `coordkit group`.*?```console\n(.*?)```", section, re.S)
    assert block, "the README's coordkit group section lost its console example"
    commands = []
    for line in block.group(1).replace("\\\n", " ").splitlines():
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
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    printed = capsys.readouterr().out
    assert printed.count("generation") >= 2 or printed.count("Stable") >= 2, printed
