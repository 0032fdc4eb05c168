"""Check that a tox env of the lowest factor really runs on coordkit's declared floors.

Prints every dependency coordkit declares (its core and extras, from the installed coordkit's
metadata) with the version installed, and exits 1 if an installed one is above the floor of its
specifier: such an env would pass while testing a newer release than the one it claims. The
floor's major.minor must match; a patch release above it is allowed, since that is what a
resolver picks when the .0 release is yanked or has no wheel for this Python. Dependencies of
extras that are not installed are listed as such.

Usage (tox's py311-lowest-* envs run it before pytest): python .ci/floors.py
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, requires, version

from packaging.requirements import Requirement
from packaging.version import Version

PROJECT = "coordkit"


def floor_of(requirement: Requirement) -> Version | None:
    """The lowest version a requirement's specifier allows, or None when it sets no lower bound."""
    for spec in requirement.specifier:
        if spec.operator in (">=", "==", "~=", "==="):
            return Version(spec.version)
    return None


def major_minor(v: Version) -> tuple[int, int]:
    release = (*v.release, 0)
    return release[0], release[1]


def main() -> int:
    declared = [Requirement(line) for line in requires(PROJECT) or []]
    rows: list[tuple[str, str, str]] = []
    above: list[str] = []
    seen: set[tuple[str, str]] = set()
    for requirement in declared:
        if requirement.name == PROJECT:  # the `all` extra names the others
            continue
        floor = floor_of(requirement)
        if floor is None or (requirement.name, str(floor)) in seen:
            continue
        seen.add((requirement.name, str(floor)))
        try:
            installed = Version(version(requirement.name))
        except PackageNotFoundError:
            rows.append((requirement.name, str(requirement.specifier), "not installed"))
            continue
        rows.append((requirement.name, str(requirement.specifier), str(installed)))
        if major_minor(installed) != major_minor(floor):
            above.append(
                f"{requirement.name} {installed} is installed, not the floor of "
                f"{requirement.name}{requirement.specifier}"
            )
    width = max(len(name) for name, _, _ in rows)
    print(f"{PROJECT} {version(PROJECT)}: declared dependencies and the versions installed")
    for name, specifier, installed in sorted(rows):
        print(f"  {name:<{width}}  {specifier:<12}  {installed}")
    for line in above:
        print(f"error: {line}", file=sys.stderr)
    if above:
        print(
            "error: this env must run on the floors; recreate it (tox run -r -e ENV) and check "
            "that nothing is installed before coordkit's own lowest-direct resolution",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
