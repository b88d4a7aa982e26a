"""One OPENed stream: an inbound byte queue and a flow-controlled outbound side.

Inbound WRTEs are queued and acknowledged at once while the queue is short (so the server
keeps sending while the service writes), later otherwise (bounded memory). Outbound, one
WRTE is in flight at a time; small writes made meanwhile are coalesced into the next one.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Protocol

from virtual_lab.adbd.wire import A_CLSE, A_OKAY, A_WRTE, ConnectionGone

INBOUND_WINDOW = 8  # WRTEs queued per stream before acknowledgements are held back


class Link(Protocol):
    """The connection a stream lives on, as its stream and the services see it."""

    max_out: int          # largest WRTE payload the server accepts
    aborted: bool         # the link was cut (fault, offline, stop)
    keep_partial: bool    # ... by a fault that leaves a partially sent file in place

    def send(self, command: int, arg0: int, arg1: int, payload: bytes | bytearray | memoryview = b"") -> None: ...

    def abort(self, keep_partial: bool) -> None: ...

    def forget_stream(self, local_id: int) -> None: ...


class Stream:
    """One OPENed service: an inbound byte queue and a flow-controlled outbound side."""

    def __init__(self, conn: Link, local_id: int, remote_id: int) -> None:
        self.conn = conn
        self.local_id = local_id
        self.remote_id = remote_id
        self._cond = threading.Condition()
        self._chunks: collections.deque[memoryview] = collections.deque()
        self._owed_ack = False
        self._can_send = True
        # Small replies written while a WRTE awaits its OKAY are coalesced into the next one, as
        # adbd's socket buffer does: pipelined sync requests then cost one round trip, not n.
        self._pending = bytearray()
        self._write_lock = threading.Lock()
        self.remote_closed = False
        self.local_closed = False

    # ---- inbound (reader thread) --------------------------------------------------------
    def feed(self, payload: bytearray) -> None:
        with self._cond:
            if self.remote_closed or self.local_closed:
                return
            self._chunks.append(memoryview(payload))
            ack_now = len(self._chunks) <= INBOUND_WINDOW
            if not ack_now:
                self._owed_ack = True
            self._cond.notify_all()
        if ack_now:
            self._send_okay()

    def on_okay(self, remote_id: int) -> None:
        with self._cond:
            if remote_id:
                self.remote_id = remote_id
            if self._pending and not (self.remote_closed or self.local_closed):
                piece, self._pending = bytes(self._pending), bytearray()
                self._send_wrte(piece)  # under the lock: nothing can overtake it
            else:
                self._pending.clear()
                self._can_send = True
            self._cond.notify_all()

    def _send_wrte(self, piece: bytes | memoryview) -> bool:
        try:
            self.conn.send(A_WRTE, self.local_id, self.remote_id, piece)
        except ConnectionGone:
            self.remote_closed = True
            self._cond.notify_all()
            return False
        return True

    def on_remote_close(self) -> None:
        with self._cond:
            self.remote_closed = True
            self._cond.notify_all()
        self.conn.forget_stream(self.local_id)

    def _send_okay(self) -> None:
        try:
            self.conn.send(A_OKAY, self.local_id, self.remote_id)
        except ConnectionGone:
            pass

    # ---- inbound (service thread) -------------------------------------------------------
    def read_chunk(self, max_n: int) -> memoryview | None:
        """Up to max_n bytes (at least 1); None once the stream is closed and drained."""
        with self._cond:
            while not self._chunks:
                if self.remote_closed or self.local_closed:
                    return None
                self._cond.wait()
            head = self._chunks[0]
            if len(head) <= max_n:
                self._chunks.popleft()
                piece = head
            else:
                piece = head[:max_n]
                self._chunks[0] = head[max_n:]
            ack = self._owed_ack and len(self._chunks) < INBOUND_WINDOW
            if ack:
                self._owed_ack = False
        if ack:
            self._send_okay()
        return piece

    def read_exact(self, n: int) -> bytes | None:
        parts: list[memoryview] = []
        need = n
        while need:
            piece = self.read_chunk(need)
            if piece is None:
                return None
            parts.append(piece)
            need -= len(piece)
        return b"".join(parts) if len(parts) != 1 else bytes(parts[0])

    # ---- outbound -----------------------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> bool:
        """Send data as WRTEs (each waits for the previous OKAY). False if the stream closed."""
        view = memoryview(data).cast("B")
        with self._write_lock:
            for off in range(0, len(view), self.conn.max_out):
                if not self._write_one(view[off:off + self.conn.max_out]):
                    return False
        return True

    def _write_one(self, piece: memoryview) -> bool:
        with self._cond:
            # Wait while a WRTE is in flight and this piece would not fit the next one.
            while not self._can_send and len(self._pending) + len(piece) > self.conn.max_out:
                if self.remote_closed or self.local_closed:
                    return False
                self._cond.wait()
            if self.remote_closed or self.local_closed:
                return False
            if not self._can_send:
                self._pending += piece
                return True
            self._can_send = False
            sent = self._send_wrte(piece)
        if not sent:
            self.on_remote_close()
        return sent

    def close(self) -> None:
        with self._cond:
            if self.local_closed:
                return
            # Coalesced output goes out before the CLSE (bounded: a peer that never OKAYs is gone).
            deadline = time.monotonic() + 10
            while self._pending and not self.remote_closed and time.monotonic() < deadline:
                self._cond.wait(0.5)
            self.local_closed = True
            send = not self.remote_closed
            self._cond.notify_all()
        if send:
            try:
                self.conn.send(A_CLSE, self.local_id, self.remote_id)
            except ConnectionGone:
                pass
        self.conn.forget_stream(self.local_id)

