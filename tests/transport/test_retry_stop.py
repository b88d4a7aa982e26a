"""A night's stop starts nothing new through a retry: the policy asks whether a stop came before
each try after the first (issue 44: new pushes started after `[lab] stopping` on a slow link)."""

from __future__ import annotations

import threading

import pytest

from harness.errors import ConnectionDropped
from harness.transport import RetryPolicy


def test_a_retry_is_not_tried_once_the_stop_is_set() -> None:
    policy = RetryPolicy(attempts=4, max_seconds=30, wait_initial=0.01, wait_max=0.02)
    stop = threading.Event()
    tries: list[int] = []

    def push() -> int:
        tries.append(1)
        if len(tries) == 2:
            stop.set()  # the stop comes while the second try is on the wire
        raise ConnectionDropped("link dropped mid-push", device="phone")

    with pytest.raises(ConnectionDropped):
        policy.run("push model.pte", push, stopped=stop.is_set)
    assert len(tries) == 2, "no third try after the stop"
    tries.clear()
    with pytest.raises(ConnectionDropped):
        policy.run("push model.pte", push, stopped=stop.is_set)
    assert len(tries) == 1, "stopped already: the first fault is final"
