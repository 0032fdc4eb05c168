"""What a controller watches in the store, and what each change marks for its next pass (Kafka's
``ZNodeChangeHandler`` and ``ZNodeChildChangeHandler`` objects of ``KafkaController``: broker
registrations, topic deletions, ISR change notifications, reassignments, preferred elections,
the topic list and each topic's assignment).

A watch only marks (level-triggered: the pass reads what the store holds then). With a standby's
image handed over by a warm election, the image's feed tells topics created and deleted and
assignments changed, so neither the topic list nor a topic's assignment is watched (a watch per
topic is thousands of round trips at millions of partitions).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from coordkit.engine import isr_notifications
from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.events import Marks
from coordkit.kafka import layout
from coordkit.store import ChildrenEvent, DataEvent, MetadataStore, Watch
from coordkit.strategies.elections import ControllerTerm


class ControllerWatches:
    """One term's watches on ``store``; each change calls ``mark`` with what to look at again."""

    def __init__(
        self,
        store: MetadataStore,
        context: ControllerContext,
        term: ControllerTerm,
        mark: Callable[[Marks], None],
    ) -> None:
        self.store = store
        self.context = context
        self.term = term
        self.mark = mark
        self._watches: list[Watch] = []
        self._topic_watches: dict[str, Watch] = {}
        #: With a standby's image the feed tells assignment changes (no watch per topic).
        self._unfollow_image: Callable[[], None] | None = None

    @property
    def watched(self) -> tuple[Watch, ...]:
        """The watches placed, topics' assignments aside."""
        return tuple(self._watches)

    @property
    def topic_watches(self) -> dict[str, Watch]:
        """The watches on topics' assignments, by topic."""
        return dict(self._topic_watches)

    def start(self) -> None:
        if self.term.image is not None:
            # Before the first pass fills the context: a change in between is told, not lost.
            self._unfollow_image = self.term.image.follow_assignments(self._image_assignment)
        watch, mark = self.store.watch_children, self.mark
        self._watches = [
            watch(layout.BROKER_IDS, lambda e: mark(Marks(brokers=True))),
            watch(layout.DELETE_TOPICS, lambda e: mark(Marks(deletions=True))),
            watch(isr_notifications.ISR_CHANGE_NOTIFICATION, self._isr_notified),
            self.store.watch_data(
                layout.REASSIGN_PARTITIONS, lambda e: mark(Marks(reassignments=True))
            ),
            self.store.watch_data(
                layout.PREFERRED_REPLICA_ELECTION, lambda e: mark(Marks(preferred=True))
            ),
        ]
        if self._unfollow_image is None:
            # With an image, its feed tells topics created and deleted (the children of
            # /brokers/topics, each delivery a read of every topic's name, are not watched).
            self._watches.append(watch(layout.BROKER_TOPICS, lambda e: mark(Marks(topics=True))))

    def sync_topics(self) -> None:
        """Watch the assignment of every topic the context knows (partition additions), and of
        the unreadable ones (they are retried when they change); none while the image handed
        over by a warm election tells every topic's changes."""
        if self._unfollow_image is not None:
            return
        wanted = set(self.context.topics) | set(self.context.ignored_topics)
        for topic in set(self._topic_watches) - wanted:
            self._topic_watches.pop(topic).cancel()
        for topic in sorted(wanted - set(self._topic_watches)):
            self._topic_watches[topic] = self.store.watch_data(
                f"{layout.BROKER_TOPICS}/{topic}", functools.partial(self._assignment_event, topic)
            )

    def cancel(self) -> None:
        for watch in [*self._watches, *self._topic_watches.values()]:
            watch.cancel()
        self._watches = []
        self._topic_watches = {}
        unfollow, self._unfollow_image = self._unfollow_image, None
        if unfollow is not None:
            unfollow()

    def _isr_notified(self, event: ChildrenEvent) -> None:
        if event.children:
            self.mark(Marks(isr_changes=True))

    def _image_assignment(self, topic: str | None, mzxid: int | None) -> None:
        image = self.term.image
        if topic is None:
            if image is not None:
                self.mark(Marks(topics=True, assignments=set(image.topic_names())))
        elif mzxid is None or topic not in self.context.known_topics:
            self.mark(Marks(topics=True))  # created or deleted: the topic list changed
        elif mzxid != self.context.assignment_mzxid.get(topic):
            self.mark(Marks(assignments={topic}))

    def _assignment_event(self, topic: str, event: DataEvent) -> None:
        # A delivery showing what the context already read (a new watch's first one) is no news.
        version = event.stat.mzxid if event.stat is not None else None
        if version is None or version != self.context.assignment_mzxid.get(topic):
            self.mark(Marks(assignments={topic}))
