"""Every code example of the documentation (README.md and the pages of docs/) runs where the reader
finds it, or, marked so above it, is checked as far as it can be alone (tests/harness/docs.py
reads the pages and describes the marks).

* ``python``: run in a fresh interpreter in the page's working directory; it must exit 0, and when
  the sentence after it says "It prints `a`, `b` ...", print exactly those lines.
* ``console``: every ``$ coordkit ...`` command runs (click's runner, in the page's working
  directory, ``< FILE`` read as its input) and must exit 0, printing the lines shown after it.
* ``sh``: command lines shown rather than run (Spark runs, installs): each ``coordkit`` line must
  parse (every command, option and value accepted; a file it names is made empty first: the line
  is checked, not its input), each ``pip install -e '.[EXTRAS]'`` name extras pyproject.toml
  declares, each ``bash run X`` a subcommand of ``run``.
* ``toml``, ``json``, ``ini``: parse.

Marks: ``file NAME`` writes the block as NAME into the page's working directory before the page's
commands run; ``run by tests/PATH.py`` hands the block to that test, which must read the block's
page; ``not run: WHY`` keeps the checks that need nothing running (Python compiles, ``coordkit``
command lines parse). Blocks in ``text`` or no language show output or trees and are no examples.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from coordkit.cli import cli
from harness.docs import README, ROOT, CodeBlock, code_block, code_blocks, page, pages, shown

#: The languages of examples, and of blocks that show rather than run (output, trees, diagrams).
EXAMPLES = ("python", "console", "sh", "toml", "json", "ini")
NOT_CODE = ("text", "")
EXTRAS = set(
    tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
)
RUN = (ROOT / "run").read_text()

BLOCKS = [b for document in pages() for b in code_blocks(document) if not b.is_directive]


def examples() -> list[CodeBlock]:
    return [b for b in BLOCKS if b.language in EXAMPLES]


# -- the pages' working directories ----------------------------------------------------------------


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    """A directory per page, holding the page's ``file`` blocks, where its examples run."""
    made: dict[Path, Path] = {}
    for block in BLOCKS:
        if block.document not in made:
            made[block.document] = tmp_path_factory.mktemp(block.document.stem)
        if block.mark and block.mark.startswith("file "):
            name = block.mark.removeprefix("file ").strip()
            (made[block.document] / name).write_text(block.text)
    return made


# -- how each language runs ------------------------------------------------------------------------


def command_lines(text: str) -> list[str]:
    """The lines of a shell block, continuations joined."""
    return text.replace("\\\n", " ").splitlines()


def parse_coordkit(words: list[str], scratch: Path) -> None:
    """Check one ``coordkit`` command line against the command's own parser (the command, every
    option and every value), without running it."""
    # A file name (a word with an extension) is made empty: the line is checked, not its input.
    files = [w for w in words if re.search(r"^[^-/][^:]*\.\w+$", w)]
    for name in files:
        (scratch / name).parent.mkdir(parents=True, exist_ok=True)
        (scratch / name).touch()
    command: click.Command = cli
    parent, name, rest = None, "coordkit", words
    while isinstance(command, click.Group):
        context = click.Context(command, info_name=name, parent=parent)
        assert rest, f"coordkit {' '.join(words)}: no command"
        found = command.get_command(context, rest[0])
        assert found is not None, (
            f"coordkit has no command {' '.join(words[: len(words) - len(rest) + 1])}"
        )
        parent, name, rest, command = context, rest[0], rest[1:], found
    command.make_context(name, rest, parent=parent)


def check_sh(block: CodeBlock, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(scratch)
    for line in command_lines(block.text):
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "coordkit":
            parse_coordkit(words[1:], scratch)
        elif words[:3] == ["pip", "install", "-e"]:
            extras = re.fullmatch(r"\.(?:\[([\w,]+)\])?", words[3])
            assert extras, f"{block}: {line}"
            assert set((extras.group(1) or "").split(",")) - {""} <= EXTRAS, f"{block}: {line}"
        elif words[:2] == ["bash", "run"]:
            assert re.search(rf"^cmd_{words[2]}\(\) \{{", RUN, re.M), (
                f"{block}: run has no {words[2]}"
            )
        elif not block.mark:
            pytest.fail(
                f"{block}: {line!r} is not a coordkit command: run it here or mark the block"
            )


def console_commands(block: CodeBlock) -> list[tuple[list[str], list[str]]]:
    """Each ``$`` command of a console block, with the lines shown after it (its output)."""
    commands: list[tuple[list[str], list[str]]] = []
    for line in command_lines(block.text):
        if line.startswith("$ "):
            words = shlex.split(line[2:])
            commands.append((words[:-1] if words[-1] == "&" else words, []))
        else:
            assert commands, f"{block}: output before any command"
            commands[-1][1].append(line)
    return commands


def run_console(block: CodeBlock, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(workdir)
    for line, shown_output in console_commands(block):
        assert line[0] == "coordkit", f"{block}: {line[0]} is not coordkit: mark the block"
        words, given = line[1:], None
        if "<" in words:
            at = words.index("<")
            given = (workdir / words[at + 1]).read_text()
            words = words[:at] + words[at + 2 :]
        result = CliRunner().invoke(
            cli, words, input=given, env={"COLUMNS": "160", "COORDKIT_STORE": None}
        )
        assert result.exit_code == 0, f"{block}: {' '.join(line)}\n{result.output}"
        for printed in shown_output:
            assert printed in result.output, f"{block}: {' '.join(line)} did not print {printed!r}"


def run_python(block: CodeBlock, workdir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", block.text],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{block}:\n{done.stderr}"
    if block.after.startswith("It prints "):
        promised = re.findall(r"`([^`]*)`", block.after)
        assert done.stdout.splitlines() == promised, f"{block} printed:\n{done.stdout}"


def parse(block: CodeBlock) -> None:
    if block.language == "toml":
        tomllib.loads(block.text)
    elif block.language == "json":
        json.loads(block.text)
    elif block.language == "ini":
        configparser.ConfigParser().read_string(block.text)


# -- the tests -------------------------------------------------------------------------------------


def test_every_block_is_an_example_or_shows_output() -> None:
    """A block in another language would be neither run nor checked."""
    others = [f"{b} ({b.language})" for b in BLOCKS if b.language not in (*EXAMPLES, *NOT_CODE)]
    assert not others, f"blocks this test does not know how to run: {others}"


def test_every_mark_is_one_this_test_knows() -> None:
    marks = [b for b in BLOCKS if b.mark is not None]
    assert marks
    unknown = [
        f"{b}: {b.mark}"
        for b in marks
        if not re.match(r"(file \S+|run by tests/\S+\.py\b.*|not run: .+)$", b.mark)
    ]
    assert not unknown


@pytest.mark.timeout(240)
@pytest.mark.parametrize("block", examples(), ids=str)
def test_the_example_runs_or_is_checked(
    block: CodeBlock,
    workdirs: dict[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mark = block.mark or ""
    runs_here = not mark.startswith(("run by ", "not run: "))
    if mark.startswith("run by "):
        test = ROOT / mark.removeprefix("run by ").split(",")[0].strip()
        assert test.is_file(), f"{block}: the mark names {test}, which does not exist"
        assert block.document.name in test.read_text(), f"{block}: {test} does not read the page"
    parse(block)
    if block.language == "python":
        if runs_here:
            run_python(block, workdirs[block.document])
        else:
            compile(block.text, str(block), "exec")
    elif block.language == "console":
        if runs_here:
            run_console(block, workdirs[block.document], monkeypatch)
        else:
            monkeypatch.chdir(tmp_path)
            for words, _ in console_commands(block):
                if words[0] == "coordkit":
                    parse_coordkit(words[1:], tmp_path)
    elif block.language == "sh":
        check_sh(block, tmp_path, monkeypatch)


def test_the_readme_opens_with_the_two_commands_ci_runs() -> None:
    """The README's first lines are the two commands: the lab and the whole test suite, the one
    CI runs; the getting-started page shows the same block."""
    first = code_blocks(README)[0]
    assert first.line == 1
    commands = [shlex.split(line, comments=True) for line in first.text.splitlines()]
    assert commands == [["bash", "run", "lab"], ["bash", "run", "test"]]
    for name in ("lab", "test"):
        assert re.search(rf"^cmd_{name}\(\) \{{", RUN, re.M), f"run has no {name}"
    assert "exec bash run test" in (ROOT / ".ci" / "run").read_text()
    started = code_block(page("getting-started.md"), "The two commands", "sh")
    assert started.text == first.text, f"{started} is not {shown(README)}'s first block"


def test_the_readmes_links_reach_the_pages_and_their_headings() -> None:
    """The README is a front page: each of its links into the repository names a file there, and
    a ``#heading`` one of that page's headings (GitHub's anchors)."""
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)(?:#([^)]+))?\)", text)
    local = [(target, anchor) for target, anchor in links if "://" not in target]
    assert local
    for target, anchor in local:
        path = ROOT / target
        assert path.exists(), f"README.md links to {target}, which does not exist"
        if anchor:
            lines = path.read_text(encoding="utf-8").splitlines()
            headings = [line.lstrip("#").strip() for line in lines if line.startswith("#")]
            anchors = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
            assert anchor in anchors, f"README.md links to {target}#{anchor}: no such heading"
