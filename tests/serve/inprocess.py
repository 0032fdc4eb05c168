"""``coordkit serve`` in this process, on a thread of its own: for tests that look inside the
brokers (their logs, the replication model) or act on one broker (pause its fetching, crash it).

A test module imports the ``in_process`` fixture as ``in_process_fixture``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from coordkit.engine import EngineConfig
from coordkit.serve import KafkaServer
from coordkit.serve.context import BrokerContext, ServeSettings
from coordkit.serve.dataplane.replicas import Replicas
from harness.backends import Backend

T = TypeVar("T")
STARTUP_SECONDS = 60


class InProcessServer:
    """Brokers ``0..brokers-1`` on ``store_url``, served on free ports by a background thread."""

    def __init__(
        self,
        store_url: str,
        brokers: int,
        config: EngineConfig | None = None,
        data_dir: Path | None = None,
        settings: ServeSettings | None = None,
    ) -> None:
        self.store_url = store_url
        self.server = KafkaServer(
            store_url,
            list(range(brokers)),
            port=0,
            config=config,
            data_dir=data_dir,
            settings=settings,
        )
        self._closed = False
        self.server.start_brokers()
        ready = threading.Event()
        self._failed: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        if not ready.wait(STARTUP_SECONDS):
            raise AssertionError(f"the in-process server did not start: {self._failed}")

    def _run(self, ready: threading.Event) -> None:
        try:
            asyncio.run(self.server.serve(ready.set))
        except BaseException as exc:
            self._failed.append(exc)
            ready.set()
            raise

    @property
    def bootstrap(self) -> str:
        return ",".join(str(a) for a in self.server.addresses.values())

    def address(self, broker_id: int) -> str:
        return str(self.server.addresses[broker_id])

    @property
    def replicas(self) -> Replicas:
        assert self.server.replicas is not None
        return self.server.replicas

    def context(self, broker_id: int) -> BrokerContext:
        return next(lsn.ctx for lsn in self.server.listeners if lsn.ctx.broker_id == broker_id)

    def on_loop(self, call: Callable[[], T]) -> T:
        """``call()`` run on the server's event loop (where the logs live), its result here."""

        async def run() -> T:
            return call()

        loop = self.server._loop
        assert loop is not None
        return asyncio.run_coroutine_threadsafe(run(), loop).result(30)

    def close(self) -> None:
        """Stop serving and close the brokers (a second call does nothing)."""
        if self._closed:
            return
        self._closed = True
        self.server.stop()
        self.thread.join(30)
        self.server.close()


InProcessFactory = Callable[..., InProcessServer]


@pytest.fixture(name="in_process")
def in_process_fixture(backend: Backend) -> Iterator[InProcessFactory]:
    started: list[InProcessServer] = []

    def start(
        brokers: int = 3,
        config: EngineConfig | None = None,
        *,
        store_url: str | None = None,
        data_dir: Path | None = None,
        settings: ServeSettings | None = None,
    ) -> InProcessServer:
        """A server on ``store_url`` (default: a new store of the backend)."""
        url = backend.new_url() if store_url is None else store_url
        server = InProcessServer(url, brokers, config, data_dir, settings)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()
