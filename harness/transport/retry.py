"""Retry policy for transport faults only (tenacity). A command's non-zero exit or a test's
own failure is a result and is never retried; only errors whose `retryable` is true are."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from harness.errors import TransportError

if TYPE_CHECKING:
    from tenacity import RetryCallState

T = TypeVar("T")


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, TransportError) and exc.retryable


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    max_seconds: float = 60.0
    wait_initial: float = 0.5
    wait_max: float = 8.0

    def run(self, what: str, fn: Callable[[], T], on_retry: Callable[[BaseException], None] | None = None,
            *, stopped: Callable[[], bool] | None = None) -> T:
        """`fn`, tried again on a retryable transport fault, never once `stopped()` says a stop
        came (a night's stop starts no new push or command through a retry)."""
        # The first attempt runs bare: tenacity and logging (~15 ms of a `harness push`
        # start-up) are imported only once a transport fault happened. That fault is then
        # replayed as tenacity's first attempt, so the policy below decides every retry.
        try:
            return fn()
        except BaseException as exc:
            if self.attempts <= 1 or not is_retryable(exc) or (stopped is not None and stopped()):
                raise
            first: list[BaseException] = [exc]

        def attempt() -> T:
            if first:
                raise first.pop()
            return fn()

        return self._retrying(what, on_retry, stopped)(attempt)

    def _retrying(self, what: str, on_retry: Callable[[BaseException], None] | None,
                  stopped: Callable[[], bool] | None) -> Callable[[Callable[[], T]], T]:
        import logging

        from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential

        log = logging.getLogger("harness.transport")

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning("transport fault during %s (attempt %d/%d): %s; retrying in %.1fs",
                        what, state.attempt_number, self.attempts, exc, state.next_action.sleep if state.next_action else 0)
            if on_retry is not None and exc is not None:
                on_retry(exc)

        retrying = Retrying(
            retry=retry_if_exception(lambda e: is_retryable(e) and not (stopped is not None and stopped())),
            stop=stop_after_attempt(self.attempts) | stop_after_delay(self.max_seconds),
            wait=wait_exponential(multiplier=self.wait_initial, max=self.wait_max),
            before_sleep=before_sleep,
            reraise=True,
        )
        return retrying


NO_RETRY = RetryPolicy(attempts=1)
