"""One broker's TCP listener and its connections, on asyncio.

All brokers of a ``coordkit serve`` process share one event loop on one thread: each connection is
its own task, so a slow client (a long-polling fetch, a peer that stops reading) holds up only its
own connection; store work runs in worker threads (:meth:`BrokerContext.blocking`). Within a
connection requests are answered one at a time and in order, as Kafka's brokers do (a client
matches answers to requests by order and correlation id).

A malformed frame (a size over the limit, bytes the codec refuses) or a request for an api or
version this server does not advertise closes that connection and nothing else, as Kafka does.

Stopping (the server, or one broker in-process) cancels every connection's task, idle or with a
request in flight (a long-polling fetch, an acks=all produce): each closes its connection and
ends quietly.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from coordkit.protocol import FrameReader, KafkaCodec, ProtocolError
from coordkit.serve.context import BrokerContext
from coordkit.serve.dispatch import Dispatcher, UnservedRequestError
from coordkit.terminal import visible

log = logging.getLogger("coordkit.serve")

#: Bytes read from a socket at a time.
READ_CHUNK = 64 * 1024


class BrokerListener:
    """Serves broker ``ctx`` on the bound, listening socket ``sock``."""

    def __init__(self, ctx: BrokerContext, sock: socket.socket, codec: KafkaCodec) -> None:
        self.ctx = ctx
        self.sock = sock
        self.codec = codec
        self.dispatcher = Dispatcher(ctx, codec)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, sock=self.sock)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        frames = FrameReader(self.codec)
        try:
            while data := await reader.read(READ_CHUNK):
                for frame in frames.feed(data):
                    response = await self.dispatcher.answer(frame)
                    if response is not None:
                        writer.write(response)
                        await writer.drain()
        except (ProtocolError, UnservedRequestError) as exc:
            log.warning(
                "broker %s: closing the connection from %s: %s",
                self.ctx.broker_id,
                _address(peer),
                visible(str(exc)),
            )
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        except asyncio.CancelledError:
            # The listener closes (the server or this broker stops): a normal end. Ending the
            # task cancelled instead would make asyncio's stream protocol log a traceback per
            # connection (its done callback asks a cancelled task for its exception).
            pass
        except Exception:
            log.exception("broker %s: request from %s failed", self.ctx.broker_id, _address(peer))
        finally:
            self._connections.discard(task)
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, asyncio.CancelledError):
                pass


def _address(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)
