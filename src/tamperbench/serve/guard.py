"""Connection-level guards for ``tamperbench serve``: a cap on open connections and a deadline to send a
whole request (slowloris).

WHY here and not in uvicorn's options: uvicorn's ``timeout_keep_alive`` runs only between requests, after
a response, so a client that opens a connection and sends part of a header is never closed; and its
``limit_concurrency`` answers 503 to a request, which a slow client never finishes sending, so the
connections themselves pile up until the process runs out of file descriptors and accepts nothing
(1,100 such connections against uvicorn alone: none closed after 30 s, ``/v1/models`` timing out). This subclass of uvicorn's h11
protocol adds both guards at the connection:

- at most ``max_connections`` open at once: one past it is closed as soon as it is accepted;
- ``read_timeout`` seconds to send a whole request (request line, headers and body), counted from the
  connection's start or from the end of the previous response; a connection still sending then is closed.
  Time the server spends computing an answer is not counted (the request has arrived);
- idle keep-alive connections are closed after uvicorn's ``timeout_keep_alive``; one header or body part
  larger than h11's incomplete-event limit (16 KiB by default) is a 400.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

SPARE_FDS = 64  # file descriptors kept beyond the connection cap (model files, the tokenizer, logs)


def ensure_fd_room(max_connections: int) -> None:
    """Raise the soft RLIMIT_NOFILE to fit the cap (never the hard one); one line when it cannot fit."""
    import resource

    from tamperbench.errors import UserError

    need = max_connections + SPARE_FDS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            raise UserError(f"--max-connections: {max_connections} needs {need} file descriptors and this process "
                            f"may open at most {hard} (ulimit -n); lower it")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def guarded_protocol(max_connections: int, read_timeout: float) -> type[asyncio.Protocol]:
    """An h11 protocol class (for ``uvicorn.Config(http=...)``) enforcing the two limits above."""

    class GuardedH11Protocol(H11Protocol):
        _read_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.abort()  # over the cap: gone at once, so it holds no file descriptor for long
                return
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._read_deadline = self.loop.call_later(read_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._read_deadline is not None:
                self._read_deadline.cancel()
                self._read_deadline = None

        def _too_slow(self) -> None:
            self._read_deadline = None
            if self.conn.their_state is not h11.DONE and not self.transport.is_closing():
                self.transport.close()  # a handler waiting on the body sees its client gone

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is h11.DONE:
                self._disarm()  # the whole request is here: computing the answer is not the client's time

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is not h11.DONE:
                self._arm()  # the next request on this connection has the same deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return GuardedH11Protocol
