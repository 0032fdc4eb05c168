"""Bulk reads of one ZooKeeper session (:meth:`~coordkit.store.MetadataStore.get_many`): one
``multiRead`` request per thousand paths when the server answers it (configured, or probed once:
ZooKeeper 3.6+), else pipelined ``getData`` requests."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kazoo import exceptions as kz
from kazoo.protocol import serialization as proto

from coordkit.errors import ConnectionLossError, SessionExpiredError, StoreError
from coordkit.store import Stat, paths
from coordkit_zookeeper import multiread
from coordkit_zookeeper.errors import translate
from coordkit_zookeeper.requests import to_stat

if TYPE_CHECKING:
    from coordkit_zookeeper.session import ZooKeeperSession

log = logging.getLogger("coordkit.zookeeper")

#: Failures that say nothing about what the server supports.
TRANSIENT = (
    kz.ConnectionLoss,
    kz.ConnectionClosedError,
    kz.ConnectionDropped,
    kz.SessionExpiredError,
    ConnectionLossError,
    SessionExpiredError,
)


class BulkReads:
    """``get_many`` for ``session``; ``multi_read``: use ``multiRead`` (True), never (False), or
    after a probe (None, the URL's ``multi_read=auto``)."""

    def __init__(self, session: ZooKeeperSession, multi_read: bool | None):
        self._session = session
        #: Whether the server answers ``multiRead`` (None: not known yet).
        self.multi_read_ok = multi_read

    def get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | StoreError]:
        """Data and stat of each path, or its error with ``op_index`` set (in order)."""
        session = self._session
        paths_ = list(paths_)
        session._check_usable(None)
        out: list[tuple[bytes, Stat] | StoreError | None] = [None] * len(paths_)
        sent: list[int] = []
        for index, path in enumerate(paths_):
            try:
                paths.validate(path)
                sent.append(index)
            except StoreError as exc:
                exc.op_index = index
                out[index] = exc
        full = [session._full(paths_[i]) for i in sent]
        if len(full) > 1 and self.multi_read_supported():
            replies = multiread.read_all(session._run, full)
        else:
            replies = session._run([proto.GetData(path, None) for path in full], "get")
        for index, reply in zip(sent, replies, strict=True):
            if isinstance(reply, BaseException):
                error = translate(reply, path=paths_[index], action="get", closing=session._closing)
                error.op_index = index
                out[index] = error
            else:
                data, stat = reply
                out[index] = (data, to_stat(stat))
        return out  # type: ignore[return-value]

    def multi_read_supported(self) -> bool:
        """Whether to use multiRead: as configured, or probed once (ZooKeeper 3.6+ has it)."""
        if self.multi_read_ok is not None:
            return self.multi_read_ok
        session = self._session
        probe = multiread.MultiRead([session._full("/")])
        reply = session._run([probe], "get")[0]
        if isinstance(reply, list) and len(reply) == 1:
            self.multi_read_ok = True
        elif isinstance(reply, TRANSIENT):
            return False  # no answer either way: read the old way and probe again next time
        else:
            log.info(
                "%s: the server does not answer multiRead (%r); bulk reads use pipelined getData",
                session.url.redacted(),
                reply,
            )
            self.multi_read_ok = False
        return self.multi_read_ok
