"""The table of the apis ``coordkit serve`` answers and what exercises each in the tests, made
from the tests themselves: ``python tools/api_coverage.py [--write | --check]``.

* The apis and versions are ``coordkit.serve.dispatch.SUPPORTED`` (what ApiVersions advertises),
  and "not served" for an api a tool or call below sends that it does not.
* Kafka's command-line tools and kcat: each command of ``tests/tools/commands.py`` names the apis
  it sends besides ApiVersions and Metadata (``Command.needs``), which every client sends.
* confluent-kafka's AdminClient: each call of ``tests/tools/admin_client.py`` likewise.
* Raw requests: the scenario differential's scenarios (``tests/differential/scenarios/``) declare
  the api versions they send.

Without options the table is printed; ``--write`` puts it into docs/serve.md between its markers,
``--check`` exits 1 when the page's table is not this one (``tests/tools/test_api_table.py`` holds
the page to it).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "serve.md"
START = "<!-- api-coverage: start (tools/api_coverage.py --write) -->"
END = "<!-- api-coverage: end -->"
#: What every Kafka client sends, whatever it does.
EVERY_CLIENT = ("ApiVersions", "Metadata")
ADMIN_CLIENT = "confluent-kafka AdminClient"


def _tests_on_path() -> None:
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)


def served() -> dict[str, tuple[int, int]]:
    from coordkit.serve.dispatch import SUPPORTED

    return {name: (lo, hi) for name, (lo, hi, _handler) in SUPPORTED.items()}


def _by_api(pairs: Iterable[tuple[str, Iterable[str]]]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for who, apis in pairs:
        for api in (*EVERY_CLIENT, *apis):
            found.setdefault(api, set()).add(who)
    return found


def tools() -> dict[str, set[str]]:
    """api → the tools (and kcat) whose commands in tests/tools send it."""
    _tests_on_path()
    from tools.commands import SCRIPT

    return _by_api((run.tool, run.needs) for run in SCRIPT)


def admin_client() -> dict[str, set[str]]:
    """api → the AdminClient methods of tests/tools that send it."""
    _tests_on_path()
    from tools.admin_client import SCRIPT

    return _by_api((call.method, call.needs) for call in SCRIPT if not call.method.startswith("("))


def scenarios() -> set[str]:
    """The apis the scenario differential's raw requests exercise."""
    _tests_on_path()
    from differential.harness import SCENARIOS

    for module in sorted((ROOT / "tests" / "differential" / "scenarios").glob("*.py")):
        importlib.import_module(f"differential.scenarios.{module.stem}")
    return {api for scenario in SCENARIOS.values() for api in scenario.versions}


def _cell(names: set[str], everyone: set[str]) -> str:
    if not names:
        return ""
    if names == everyone and len(everyone) > 1:
        return "all"
    return ", ".join(f"`{name}`" for name in sorted(names))


def table(
    apis: Mapping[str, tuple[int, int]],
    by_tool: Mapping[str, set[str]],
    by_admin: Mapping[str, set[str]],
    raw: set[str],
) -> str:
    every_tool = set().union(*by_tool.values()) if by_tool else set()
    every_method = set().union(*by_admin.values()) if by_admin else set()
    lines = [
        "| API | Versions | Kafka's tools and kcat | confluent-kafka AdminClient "
        "| Raw requests (scenario differential) |",
        "| --- | --- | --- | --- | --- |",
    ]
    # An api a tool or call sends that coordkit does not serve is a row too (the tests check
    # the tool's refusal naming it).
    for name in sorted({*apis, *by_tool, *by_admin}):
        lo, hi = apis.get(name, (-1, -1))
        versions = "not served" if name not in apis else f"{lo}–{hi}" if lo != hi else str(lo)
        lines.append(
            f"| {name} | {versions} | {_cell(by_tool.get(name, set()), every_tool)} "
            f"| {_cell(by_admin.get(name, set()), every_method)} "
            f"| {'yes' if name in raw else ''} |"
        )
    return "\n".join(lines)


def current_table() -> str:
    return table(served(), tools(), admin_client(), scenarios())


def page_table(text: str) -> str:
    """The table between the markers of the page's text."""
    if START not in text or END not in text:
        raise SystemExit(f"{PAGE}: the markers {START!r} and {END!r} are missing")
    return text[text.index(START) + len(START) : text.index(END)].strip("\n")


def main(argv: list[str]) -> int:
    made = current_table()
    if not argv:
        print(made)
        return 0
    text = PAGE.read_text(encoding="utf-8")
    if argv == ["--write"]:
        start, end = text.index(START) + len(START), text.index(END)
        PAGE.write_text(f"{text[:start]}\n{made}\n{text[end:]}", encoding="utf-8")
        return 0
    if argv == ["--check"]:
        if page_table(text) == made:
            return 0
        print(f"{PAGE}: the table of served apis is not the tests' (python tools/api_coverage.py "
              "--write)", file=sys.stderr)  # fmt: skip
        return 1
    print("usage: python tools/api_coverage.py [--write | --check]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
