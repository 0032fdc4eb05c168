"""The engine coordinator from the event loop: its calls run in worker threads, its long polls
(JoinGroup, SyncGroup) are awaited without holding the loop.

The engine completes a long poll's future from its own threads (a request, the coordinator's
ticker). Awaiting it must never cancel it: a cancelled engine future would make the coordinator
fail when it answers the round. When the wait is cancelled (the server stops), the engine still
answers the round, and nobody listens; when a client disconnects while it waits, its connection
is closed once the round answers it (the answer cannot be written), and a member that does not
come back is removed after its session timeout, as Kafka does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import TypeVar

from coordkit.engine.groups import GroupCoordinator
from coordkit.serve.context import BrokerContext

T = TypeVar("T")


def coordinator(ctx: BrokerContext) -> GroupCoordinator:
    return ctx.broker.group_coordinator


async def answer_of(future: concurrent.futures.Future[T]) -> T:
    """The result of an engine future, without ever cancelling it."""
    if future.done():
        return future.result()
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[T] = loop.create_future()

    def settle(done: concurrent.futures.Future[T]) -> None:
        if not waiter.done():
            exc = done.exception()
            if exc is not None:
                waiter.set_exception(exc)
            else:
                waiter.set_result(done.result())

    def deliver(done: concurrent.futures.Future[T]) -> None:
        try:
            loop.call_soon_threadsafe(settle, done)
        except RuntimeError:
            pass  # the loop has closed: the server stopped, nobody waits any more

    future.add_done_callback(deliver)
    return await waiter
