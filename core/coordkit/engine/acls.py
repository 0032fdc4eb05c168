"""ACLs on a metadata store in Kafka 3.9's ZooKeeper layout (:mod:`coordkit.kafka.acls`), written
as its ``AclAuthorizer`` writes them: each changed resource node replaced with a conditional set
on the version read (created when new, deleted when its last entry goes), then one change
notification per changed resource, from which every authorizer (Kafka's or coordkit's) reads
that resource again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from coordkit.errors import BadVersionError, NodeExistsError, NoNodeError
from coordkit.kafka import acls as layout
from coordkit.kafka.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourcePattern,
)
from coordkit.store import MetadataStore

log = logging.getLogger("coordkit.engine")

#: How many times a conditional write is tried again after another writer's (Kafka's
#: ``AclAuthorizer`` retries ``maxUpdateRetries`` = 10 times).
MAX_UPDATE_RETRIES = 10


class AclAdmin:
    """Reads and changes the ACLs kept on ``store``."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    # -- reading ----------------------------------------------------------------------------------

    def patterns(self) -> list[ResourcePattern]:
        """Every resource with a node (literal and prefixed)."""
        out: list[ResourcePattern] = []
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            root = layout.pattern_root(pattern_type)
            try:
                kinds = self.store.children(root)
            except NoNodeError:
                continue
            for kind in kinds:
                try:
                    names = self.store.children(f"{root}/{kind}")
                except NoNodeError:
                    continue
                for name in names:
                    pattern = layout.parse_resource_path(f"{root}/{kind}/{name}")
                    if pattern is not None:
                        out.append(pattern)
        return sorted(out)

    def read(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        """``pattern``'s entries and its node's version (-1: no node)."""
        path = layout.resource_path(pattern)
        try:
            data, stat = self.store.get(path)
        except NoNodeError:
            return frozenset(), -1
        return layout.decode_entries(path, data), stat.version

    def read_all(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every resource's entries (resources without entries left out)."""
        out = {}
        for pattern in self.patterns():
            entries, _ = self.read(pattern)
            if entries:
                out[pattern] = entries
        return out

    def describe(self, where: AclBindingFilter) -> list[AclBinding]:
        """The bindings ``where`` matches, sorted."""
        return sorted(
            AclBinding(pattern, entry)
            for pattern, entries in self.read_all().items()
            if where.matches_pattern(pattern)
            for entry in entries
            if where.matches_entry(entry)
        )

    # -- writing ----------------------------------------------------------------------------------

    def add(self, bindings: Iterable[AclBinding]) -> None:
        """Add ``bindings`` (already there: nothing changes), announcing each changed resource."""
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
        for pattern, entries in by_pattern.items():
            added = frozenset(entries)

            def union(current: frozenset[AccessControlEntry], added: frozenset[AccessControlEntry]
                      = added) -> frozenset[AccessControlEntry]:  # fmt: skip
                return current | added

            self._update(pattern, union)

    def remove(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove what each of ``filters`` matches; per filter, the bindings it removed."""
        removed: list[list[AclBinding]] = [[] for _ in filters]
        for pattern in self.patterns():
            matching = [f for f in filters if f.matches_pattern(pattern)]
            if not matching:
                continue

            def keep(current: frozenset[AccessControlEntry], pattern: ResourcePattern = pattern
                     ) -> frozenset[AccessControlEntry]:  # fmt: skip
                return frozenset(e for e in current
                                 if not any(f.matches(AclBinding(pattern, e)) for f in filters))  # fmt: skip

            before = self._update(pattern, keep)
            for index, where in enumerate(filters):
                removed[index].extend(
                    AclBinding(pattern, e) for e in sorted(before)
                    if where.matches(AclBinding(pattern, e))
                )  # fmt: skip
        return removed

    def _update(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> frozenset[AccessControlEntry]:
        """Replace ``pattern``'s entries with ``change(current)`` (a conditional write, tried
        again when another writer came first) and announce it; the entries before."""
        path = layout.resource_path(pattern)
        for _ in range(MAX_UPDATE_RETRIES):
            current, version = self.read(pattern)
            wanted = frozenset(change(current))
            if wanted == current:
                return current
            try:
                if not wanted:
                    self.store.delete(path, version)
                elif version < 0:
                    self.store.create(path, layout.encode_entries(wanted), make_parents=True)
                else:
                    self.store.set(path, layout.encode_entries(wanted), version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            self._announce(pattern)
            return current
        raise BadVersionError(
            f"ACLs of {pattern} changed by others {MAX_UPDATE_RETRIES} times while writing",
            path=path,
        )

    def _announce(self, pattern: ResourcePattern) -> None:
        changes = layout.changes_path(pattern.pattern_type)
        self.store.create(f"{changes}/{layout.CHANGE_PREFIX}", layout.encode_change(pattern),
                          sequential=True, make_parents=True)  # fmt: skip
        log.info("ACLs of %s changed", pattern)
