"""A study: topics, one or more consumer groups with their events, and how to compare strategies on
them (strategies, seed, replicates, metrics) — everything a run needs, in one value.

A study runs as scenarios of the ``study`` workload (``coordkit_assignors.lab.study``), one
parameter set per group: the group's case travels inside the scenario as canonical JSON, so any
Spark executor rebuilds it. A group's case holds the topics the group uses (its members'
subscriptions and what its events name), not every topic of the study.

:meth:`Study.document` is the canonical *effective* study: every default filled in, strategies and
metrics sorted, topics, members and events in their given order. Parsing it gives an equal study,
and its SHA-256 identifies the study (two runs of one study may share an ``--out`` directory).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from attrs import field, frozen

from coordkit.strategies.assignment import TopicMetadata
from coordkit_assignors.lab.events import (
    GroupEvent,
    MemberJoined,
    PartitionsAdded,
    SubscriptionChanged,
    TopicCreated,
    TopicDeleted,
)
from coordkit_assignors.lab.simulation import AssignmentCase, Member
from coordkit_assignors.lab.study import (
    STUDY_WORKLOAD,
    canonical_json,
    case_text,
    event_json,
    member_json,
    topic_json,
)
from coordkit_lab.scenarios import Preset, PresetCase, ScenarioSpec, expand

if TYPE_CHECKING:
    from coordkit.plugins import PluginManager


#: The fields of a study document that say how to compare, not what.
SETTINGS = ("strategies", "seed", "replicates", "metrics")


def _members(value: Iterable[Member]) -> tuple[Member, ...]:
    return tuple(value)


def _events(value: Iterable[GroupEvent]) -> tuple[GroupEvent, ...]:
    return tuple(value)


def _groups(value: Iterable[StudyGroup]) -> tuple[StudyGroup, ...]:
    return tuple(value)


def _topics(value: Mapping[str, TopicMetadata]) -> dict[str, TopicMetadata]:
    return dict(value)


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(value)))


@frozen
class StudyGroup:
    """One consumer group of a study: its initial members and the events it lives through."""

    name: str
    members: tuple[Member, ...] = field(converter=_members)
    events: tuple[GroupEvent, ...] = field(default=(), converter=_events)


def used_topics(group: StudyGroup) -> set[str]:
    """The topics ``group``'s members subscribe to, at the start or through events, and the
    topics its events name."""
    used = {t for m in group.members for t in m.topics}
    for event in group.events:
        if isinstance(event, MemberJoined | SubscriptionChanged):
            used.update(event.topics)
        elif isinstance(event, PartitionsAdded | TopicCreated | TopicDeleted):
            used.add(event.topic)
    return used


@frozen
class Study:
    """A whole study, defaults filled in (see the module's docstring).

    :ivar strategies: the assignors compared (sorted).
    :ivar metrics: the metrics the report shows (sorted).
    :ivar seed: the run's seed (scenario seeds derive from it).
    :ivar replicates: runs of each group per strategy; the groups are given, so replicates only
        repeat the measurement (timings), never the group.
    """

    name: str
    topics: Mapping[str, TopicMetadata] = field(converter=_topics)
    groups: tuple[StudyGroup, ...] = field(converter=_groups)
    strategies: tuple[str, ...] = field(converter=_names)
    metrics: tuple[str, ...] = field(converter=_names)
    seed: int
    replicates: int
    description: str | None = None

    @property
    def single(self) -> bool:
        """Whether the study is one group named as the study (written without ``groups``)."""
        return len(self.groups) == 1 and self.groups[0].name == self.name

    def case(self, group: StudyGroup) -> AssignmentCase:
        """``group``'s case: the topics it uses, its members, its events."""
        used = used_topics(group)
        topics = {name: meta for name, meta in self.topics.items() if name in used}
        return AssignmentCase(topics, group.members, group.events)

    def case_texts(self) -> list[str]:
        """The ``case`` parameter of each group, in the study's order."""
        return [case_text(self.case(g), g.name) for g in self.groups]

    def document(self) -> dict[str, Any]:
        """The canonical effective study (what ``OUT/study.json`` holds)."""
        out: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            out["description"] = self.description
        out["strategies"] = list(self.strategies)
        out["seed"] = self.seed
        out["replicates"] = self.replicates
        out["metrics"] = list(self.metrics)
        out["topics"] = {name: topic_json(meta) for name, meta in self.topics.items()}
        groups = {g.name: _group_json(g) for g in self.groups}
        if self.single:
            out.update(groups[self.name])
        else:
            out["groups"] = groups
        return out

    def sha256(self) -> str:
        """The study's identity: the SHA-256 of its canonical document's compact JSON."""
        return hashlib.sha256(canonical_json(self.document()).encode()).hexdigest()

    def content_sha256(self) -> str:
        """The SHA-256 of what is studied — name, description, topics, groups, events — without
        how (strategies, seed, replicates, metrics)."""
        document = {k: v for k, v in self.document().items() if k not in SETTINGS}
        return hashlib.sha256(canonical_json(document).encode()).hexdigest()

    @property
    def partitions(self) -> int:
        return sum(meta.partitions for meta in self.topics.values())

    def specs(self, manager: PluginManager) -> list[ScenarioSpec]:
        """The scenarios: every group x strategy x replicate, paired by seed as presets are."""
        preset = Preset(
            f"study {self.name}",
            self.description or f"study {self.name}",
            [PresetCase(STUDY_WORKLOAD, {"case": text}) for text in self.case_texts()],
            replicates=self.replicates,
        )
        return expand(
            preset,
            manager,
            seed=self.seed,
            strategies=list(self.strategies),
            replicates=self.replicates,
        )


def _group_json(group: StudyGroup) -> dict[str, Any]:
    return {
        "members": {m.name: member_json(m) for m in group.members},
        "events": [event_json(e) for e in group.events],
    }
