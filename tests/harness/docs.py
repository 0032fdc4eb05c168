"""The documentation as the tests read it: README.md and the pages of docs/, their sections and
fenced code blocks, so that a test holds a table or runs an example where the reader finds it.

A code block may carry a mark, an HTML comment on the line right above its opening fence (hidden
on the site, explicit in the source), which tells tests/unit/test_docs_examples.py how to take it:

* ``<!-- example: file NAME -->``: the block is a file the page's other examples use; it is
  written as NAME in the page's working directory.
* ``<!-- example: run by tests/PATH.py, ... -->``: that test runs the block (on every store
  backend, say), taking it from its page with :func:`code_block`.
* ``<!-- example: not run: WHY -->``: the block cannot run alone (it needs a Kafka cluster, a
  Spark cluster, a session of servers); it is only checked (Python compiles, command lines parse).
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^(`{3,})(.*)$")
_MARK = re.compile(r"^<!-- example: (.+?) -->$")


def page(name: str) -> Path:
    """``docs/NAME``, which must exist."""
    path = DOCS / name
    assert path.is_file(), f"the documentation has no page {name} ({path})"
    return path


def pages() -> list[Path]:
    """README.md and every Markdown page of docs/ (not the built site's)."""
    return [README, *sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)]


def shown(path: Path) -> str:
    """A document's path as a reader names it: ``README.md``, ``docs/serve.md`` (a document
    outside the repository, a test's own, by its whole path)."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


@attrs.frozen
class CodeBlock:
    """A fenced code block of a document."""

    document: Path
    #: the line of the opening fence, from 1
    line: int
    #: the fence's info string: ``python``, ``console``, ``sh``, ...; ``{toctree}`` for a directive
    language: str
    text: str
    #: the heading the block is under, without its ``#``s ("" above the first)
    heading: str
    #: what the ``<!-- example: ... -->`` line right above the fence says, if there is one
    mark: str | None
    #: the paragraph right after the block (an example's "It prints ..." sentence)
    after: str

    @property
    def is_directive(self) -> bool:
        return self.language.startswith("{")

    def __str__(self) -> str:
        return f"{shown(self.document)}:{self.line}"


def code_blocks(document: Path) -> list[CodeBlock]:
    """Every fenced block of ``document``, in order."""
    lines = document.read_text(encoding="utf-8").splitlines()
    blocks: list[CodeBlock] = []
    heading = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        opening = _FENCE.match(line)
        if opening is None:
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
            index += 1
            continue
        fence, language = opening.group(1), opening.group(2).strip()
        end = next(
            (i for i in range(index + 1, len(lines)) if lines[i].strip() == fence),
            None,
        )
        assert end is not None, f"{shown(document)}:{index + 1}: a fence that is never closed"
        mark = _MARK.match(lines[index - 1]) if index else None
        after = []
        for following in lines[end + 1 :]:
            if following.strip() or after:
                if not following.strip():
                    break
                after.append(following)
        blocks.append(
            CodeBlock(
                document=document,
                line=index + 1,
                language=language,
                text="".join(f"{text}\n" for text in lines[index + 1 : end]),
                heading=heading,
                mark=mark.group(1) if mark else None,
                after=" ".join(after),
            )
        )
        index = end + 1
    return blocks


def code_block(document: Path, heading: str, language: str) -> CodeBlock:
    """The first ``language`` block right under the heading ``heading`` of ``document`` (not under
    a later heading)."""
    found = [b for b in code_blocks(document) if b.heading == heading and b.language == language]
    assert found, f"{shown(document)} has no {language} block under the heading {heading!r}"
    return found[0]
