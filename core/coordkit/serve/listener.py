"""One broker's TCP listener and its connections, on asyncio.

All brokers of a ``coordkit serve`` process share one event loop on one thread: each connection is
its own task, so a slow client (a long-polling fetch, a peer that stops reading) holds up only its
own connection; store work runs in worker threads (:meth:`BrokerContext.blocking`). Within a
connection requests are answered one at a time and in order, as Kafka's brokers do (a client
matches answers to requests by order and correlation id).

A malformed frame (a size over the limit, bytes the codec refuses) or a request for an api or
version this server does not advertise closes that connection and nothing else, as Kafka does; so
does a handler that answers by closing (:class:`~coordkit.serve.connection.CloseConnectionError`:
a failed acks=0 produce).

Stopping (the server, or one broker in-process) cancels every connection's task, idle or with a
request in flight (a long-polling fetch, an acks=all produce): each closes its connection and
ends quietly. A connection still open after :data:`CLOSE_GRACE_SECONDS` (a peer that does not read
what is left to send; or a cancellation Python 3.11's ``asyncio.wait_for`` swallowed when it
landed as the wait ended) has its transport aborted and is cancelled again until it ends: a
stopped broker never serves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable

from coordkit.protocol import FrameReader, KafkaCodec, ProtocolError
from coordkit.serve.connection import (
    ANONYMOUS,
    CloseConnectionError,
    client_host,
    kafka_host,
    listener_name,
    on_close,
    principal,
)
from coordkit.serve.context import BrokerContext
from coordkit.serve.dispatch import Dispatcher, UnservedRequestError
from coordkit.serve.listeners.config import SSL
from coordkit.serve.listeners.sasl import AuthenticationClosedError, SaslAuthenticator
from coordkit.serve.listeners.security import ListenerSecurity
from coordkit.serve.listeners.tls import certificate_principal
from coordkit.support.terminal import visible

log = logging.getLogger("coordkit.serve")

#: Bytes read from a socket at a time.
READ_CHUNK = 64 * 1024
#: Seconds connections get to close after their tasks are cancelled before they are aborted.
CLOSE_GRACE_SECONDS = 1.0


class BrokerListener:
    """Serves broker ``ctx`` on the bound, listening socket ``sock`` of listener ``security``
    (TLS, SASL)."""

    def __init__(
        self,
        ctx: BrokerContext,
        sock: socket.socket,
        codec: KafkaCodec,
        security: ListenerSecurity | None = None,
    ) -> None:
        self.ctx = ctx
        self.sock = sock
        self.codec = codec
        self.security = security or ListenerSecurity()
        self.dispatcher = Dispatcher(ctx, codec)
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._closing = False

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, sock=self.sock,
                                                  ssl=self.security.ssl)  # fmt: skip

    def closing(self) -> bool:
        """Whether :meth:`close` began (a call, not an attribute: it changes across awaits)."""
        return self._closing

    async def close(self) -> None:
        self._closing = True
        if self._server is not None:
            self._server.close()
        grace = CLOSE_GRACE_SECONDS
        while self._connections:
            pending = list(self._connections)
            for task in pending:
                task.cancel()
            _, left = await asyncio.wait(pending, timeout=grace)
            if left:
                log.info("broker %s: %s connections still open %.1f s after the stop: aborted",
                         self.ctx.broker_id, len(left), grace)  # fmt: skip
            for task in left:
                writer = self._connections.get(task)
                if writer is not None:
                    writer.transport.abort()
            grace = 0.1
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._closing:  # accepted as the listener closed
            writer.transport.abort()
            return
        self._connections[task] = writer
        peer = writer.get_extra_info("peername")
        client_host.set(kafka_host(peer))  # this task's: the connection's handlers see it
        security = self.security
        listener_name.set(security.name)
        principal.set(ANONYMOUS)
        if security.protocol == SSL:
            principal.set(certificate_principal(writer.get_extra_info("peercert")))
        sasl = (
            SaslAuthenticator(self.ctx, self.codec, security, self.dispatcher.answer)
            if security.sasl
            else None
        )
        frames = FrameReader(self.codec)
        closing_calls: list[Callable[[], None]] = []
        on_close.set(closing_calls)
        try:
            while not self.closing() and (data := await reader.read(READ_CHUNK)):
                for frame in frames.feed(data):
                    if sasl is not None and sasl.takes(frame):
                        response = await sasl.answer(frame)
                    else:
                        response = await self.dispatcher.answer(frame)
                    if self.closing():
                        break  # a cancellation lost on the way: answer nothing more
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
        except AuthenticationClosedError as exc:
            # Kafka's SaslServerAuthenticator: its answer (if any), then the connection closes.
            if exc.response is not None:
                writer.write(exc.response)
                with contextlib.suppress(ConnectionError):
                    await writer.drain()
            log.info("broker %s: closing the connection from %s: %s", self.ctx.broker_id,
                     _address(peer), visible(str(exc)))  # fmt: skip
        except CloseConnectionError as exc:
            log.info("broker %s: closing the connection from %s: %s", self.ctx.broker_id,
                     _address(peer), exc)  # fmt: skip
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
            self._connections.pop(task, None)
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, asyncio.CancelledError):
                pass
            # A client that went away, not this broker stopping (its state stays as it was).
            for call in closing_calls if not self.closing() else ():
                try:
                    call()
                except Exception:
                    log.exception("broker %s: closing the connection from %s failed",
                                  self.ctx.broker_id, _address(peer))  # fmt: skip


def _address(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)
