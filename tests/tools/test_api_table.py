"""docs/serve.md's table of the apis ``coordkit serve`` answers, and what exercises each in the
tests, is the one ``tools/api_coverage.py`` makes from the tests (issue #35 item 5)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "api_coverage.py"


def _coverage() -> ModuleType:
    spec = importlib.util.spec_from_file_location("api_coverage", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_served_api_table_is_the_tests() -> None:
    coverage = _coverage()
    page = coverage.page_table(coverage.PAGE.read_text(encoding="utf-8"))
    made = coverage.current_table()
    assert page == made, (
        f"{coverage.PAGE}: the table of served apis is not what the tests exercise; run "
        f"`python tools/api_coverage.py --write`:\n{made}"
    )


def test_every_served_api_is_a_row_and_so_is_every_api_a_tool_sends() -> None:
    coverage = _coverage()
    served = coverage.served()
    sent = {*coverage.tools(), *coverage.admin_client()}
    table = coverage.current_table().splitlines()[2:]
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[1] for line in table}
    assert sorted(rows) == sorted({*served, *sent})
    assert all(rows[name] == "not served" for name in sent - set(served))
    assert coverage.EVERY_CLIENT[0] in served
