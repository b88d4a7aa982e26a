"""A fixed number of worker threads taking items from a queue: the lab's bound on concurrency.

A night (`scheduler.run_night`) and `harness lab status` (`status.collect_status`) each run one
pool, so a lab of 10 000 devices holds `size` threads, not 10 000 (issue 36). An item is taken
only when a thread is free, so a night's device is claimed only once a worker is there to use
it. Once `stop` is set no further item is taken; items never taken are reported as such.

Threads are daemons: a probe stuck in a dead device's link must not keep the process alive
past its deadline (the caller decides how long to wait, never `join()` without a limit).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")

# A lab host's default: the work is waiting on devices, but each worker holds a link (an adb
# server connection, an ssh session) and its buffers; past a few dozen the host is the limit.
DEFAULT_WORKERS = 32


def pool_size(wanted: int | None, items: int) -> int:
    """Threads for `items` items: the plan's `workers` (or the default), never more than items."""
    return max(1, min(items, wanted or DEFAULT_WORKERS))


class Pool(Generic[T]):
    """Run `fn(item)` for every item on `size` threads; `fn` must not raise (the caller's
    worker catches its own faults; one that escapes is re-raised by `wait` as a bug)."""

    def __init__(self, items: Iterable[T], fn: Callable[[T], None], *, size: int, stop: threading.Event,
                 name: str = "pool"):
        self._queue: deque[T] = deque(items)
        self._fn = fn
        self._stop = stop
        self._lock = threading.Lock()
        self._taken: list[T] = []
        self._errors: list[BaseException] = []
        n = max(1, min(size, len(self._queue))) if self._queue else 0
        self._finished = [threading.Event() for _ in range(n)]
        self._threads = [threading.Thread(target=self._loop, args=(ev,), daemon=True, name=f"{name}-{i}")
                         for i, ev in enumerate(self._finished)]

    @property
    def size(self) -> int:
        return len(self._threads)

    def start(self) -> Pool[T]:
        for t in self._threads:
            t.start()
        return self

    def _next(self) -> tuple[T] | None:
        """The next item (in a 1-tuple: an item may itself be None), or None when done."""
        with self._lock:
            if self._stop.is_set() or not self._queue:
                return None
            item = self._queue.popleft()
            self._taken.append(item)
            return (item,)

    def _loop(self, finished: threading.Event) -> None:
        try:
            while (got := self._next()) is not None:
                try:
                    self._fn(got[0])
                except BaseException as exc:  # kept for the caller: a worker's own bug
                    with self._lock:
                        self._errors.append(exc)
        finally:
            finished.set()

    def done(self) -> bool:
        """Every thread has returned (each thread's own event, never `Thread.is_alive()`: on
        CPython 3.11 a join interrupted by KeyboardInterrupt leaves is_alive() wrong)."""
        return all(ev.is_set() for ev in self._finished)

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` s in short sleeps (a Ctrl-C in the main thread lands between
        them); True when every thread has returned."""
        import time

        deadline = time.monotonic() + timeout
        while not self.done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(0.02, left))
        return True

    def taken(self) -> list[T]:
        with self._lock:
            return list(self._taken)

    def not_taken(self) -> list[T]:
        """Items no worker took (the pool was stopped first)."""
        with self._lock:
            return list(self._queue)

    def errors(self) -> list[BaseException]:
        with self._lock:
            return list(self._errors)
