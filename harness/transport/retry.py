"""Retry policy for transport faults only (tenacity). A command's non-zero exit or a test's
own failure is a result and is never retried; only errors whose `retryable` is true are."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential

from harness.errors import TransportError

log = logging.getLogger("harness.transport")
T = TypeVar("T")


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, TransportError) and exc.retryable


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    max_seconds: float = 60.0
    wait_initial: float = 0.5
    wait_max: float = 8.0

    def run(self, what: str, fn: Callable[[], T], on_retry: Callable[[BaseException], None] | None = None) -> T:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning("transport fault during %s (attempt %d/%d): %s; retrying in %.1fs",
                        what, state.attempt_number, self.attempts, exc, state.next_action.sleep if state.next_action else 0)
            if on_retry is not None and exc is not None:
                on_retry(exc)

        retrying = Retrying(
            retry=retry_if_exception(is_retryable),
            stop=stop_after_attempt(self.attempts) | stop_after_delay(self.max_seconds),
            wait=wait_exponential(multiplier=self.wait_initial, max=self.wait_max),
            before_sleep=before_sleep,
            reraise=True,
        )
        return retrying(fn)


NO_RETRY = RetryPolicy(attempts=1)
