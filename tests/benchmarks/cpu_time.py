"""Processes' CPU time from Linux's ``/proc`` (the benchmarks report it beside wall time)."""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")

#: A process as ``/proc/PID/stat`` tells it: (command name, parent pid, user + system seconds).
ProcessTimes = tuple[str, int, float]


def _parse(text: str) -> ProcessTimes:
    # "pid (name) state ppid ...": the name may hold spaces and parentheses.
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return name, int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def process_cpu(pid: int) -> float:
    """CPU seconds process ``pid`` has used so far (user + system)."""
    return _parse(Path(f"/proc/{pid}/stat").read_text())[2]


def every_process() -> dict[int, ProcessTimes]:
    """Every process's times so far, by pid."""
    found: dict[int, ProcessTimes] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            found[int(entry.parent.name)] = _parse(entry.read_text())
        except OSError:
            continue  # exited meanwhile
    return found


def spent_by_role(
    before: dict[int, ProcessTimes], after: dict[int, ProcessTimes], roles: dict[int, str]
) -> dict[str, float]:
    """CPU seconds spent between two :func:`every_process` readings by this process's
    descendants, summed by role (``roles``: pid → name; the others by command name), largest
    first."""
    mine = {os.getpid()}
    for _ in range(4):  # children, grandchildren (a server under a wrapper): a few levels
        mine |= {pid for pid, (_name, parent, _s) in after.items() if parent in mine}
    spent: dict[str, float] = {}
    for pid in mine:
        if pid not in after:
            continue
        name, _parent, seconds = after[pid]
        used = seconds - (before[pid][2] if pid in before else 0.0)
        if used > 0:
            role = roles.get(pid, name)
            spent[role] = round(spent.get(role, 0.0) + used, 2)
    return dict(sorted(spent.items(), key=lambda item: -item[1]))
