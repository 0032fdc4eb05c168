"""Share sessions (Kafka's ``ShareSessionCache`` and ``ShareSession``): per broker, one session
per share group and member, holding the partitions the member fetches and the epoch its next
request must carry.

A ShareFetch of epoch 0 opens a session (replacing the member's old one) with the partitions it
names; each later request carries the session's epoch, which then moves on (1, 2, ...,
2**31-1, then 1 again); epoch -1 is the member's last request: the session closes. The cache
holds at most ``max_sessions`` sessions (``group.share.max.share.sessions``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import attrs

from coordkit.serve import errors

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
#: Kafka 4.4's ``group.share.max.share.sessions``.
DEFAULT_MAX_SESSIONS = 2_000

SessionKey = tuple[str, str]  # (group id, member id)
SharePartitionKey = tuple[uuid.UUID, int]  # (topic id, partition)


def next_epoch(epoch: int) -> int:
    """Kafka's ``ShareRequestMetadata.nextEpoch``: the epoch after ``epoch``, past 0 on wrap."""
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@attrs.define
class ShareSession:
    """One member's session: the epoch its next request must carry and its partitions, in the
    order they were added."""

    key: SessionKey
    epoch: int = next_epoch(INITIAL_EPOCH)
    partitions: dict[SharePartitionKey, None] = attrs.field(factory=dict)

    def update(
        self, added: Iterable[SharePartitionKey], forgotten: Iterable[SharePartitionKey]
    ) -> None:
        for key in added:
            self.partitions.setdefault(key, None)
        for key in forgotten:
            self.partitions.pop(key, None)


class ShareSessionError(Exception):
    """A share session refused: ``code`` is Kafka's error for it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class ShareSessionCache:
    """A broker's share sessions."""

    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[SessionKey, ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: SessionKey) -> ShareSession | None:
        return self._sessions.get(key)

    def open(self, key: SessionKey, partitions: Iterable[SharePartitionKey]) -> ShareSession:
        """A new session for ``key`` (its old one, if any, replaced).

        :raises ShareSessionError: SHARE_SESSION_LIMIT_REACHED when the cache is full.
        """
        self._sessions.pop(key, None)
        if len(self._sessions) >= self.max_sessions:
            raise ShareSessionError(
                errors.SHARE_SESSION_LIMIT_REACHED,
                f"the broker holds {len(self._sessions)} share sessions, its limit",
            )
        session = self._sessions[key] = ShareSession(key)
        session.update(partitions, ())
        return session

    def next(self, key: SessionKey, epoch: int) -> ShareSession:
        """The session of ``key`` for a request of ``epoch``, its epoch moved on.

        :raises ShareSessionError: SHARE_SESSION_NOT_FOUND or INVALID_SHARE_SESSION_EPOCH.
        """
        session = self.checked(key, epoch)
        session.epoch = next_epoch(session.epoch)
        return session

    def checked(self, key: SessionKey, epoch: int) -> ShareSession:
        """The session of ``key``, checked against a request's ``epoch`` (not -1 or 0)."""
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(errors.SHARE_SESSION_NOT_FOUND,
                                    f"no share session for member {key[1]!r} of group {key[0]!r}")  # fmt: skip
        if session.epoch != epoch:
            raise ShareSessionError(errors.INVALID_SHARE_SESSION_EPOCH,
                                    f"share session epoch {epoch}, expected {session.epoch}")  # fmt: skip
        return session

    def close(self, key: SessionKey) -> ShareSession:
        """Remove the session of ``key`` (a request of epoch -1).

        :raises ShareSessionError: SHARE_SESSION_NOT_FOUND.
        """
        session = self._sessions.pop(key, None)
        if session is None:
            raise ShareSessionError(errors.SHARE_SESSION_NOT_FOUND,
                                    f"no share session for member {key[1]!r} of group {key[0]!r}")  # fmt: skip
        return session

    def remove_group(self, group_id: str) -> None:
        for key in [k for k in self._sessions if k[0] == group_id]:
            del self._sessions[key]

    def remove(self, key: SessionKey) -> bool:
        return self._sessions.pop(key, None) is not None
