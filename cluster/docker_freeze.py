"""Pausing and resuming a container through the engine (the cgroup freezer), retried where runc gives up.

Guarantees: `freeze(c)` returns once the container is paused; when the engine answers that runc
could not freeze the cgroup in time ("unable to freeze", which a loaded machine gives: 2 of 60
pause/resume cycles at load 21 on 2 cores), it asks again, up to FREEZE_ATTEMPTS times with a
growing pause, and raises the engine's error only after the last attempt or at once for any other
error. A container found paused after a failed call counts as paused. `thaw(c)` does the same for
resume. Neither sleeps when the first call succeeds.
"""
from __future__ import annotations

import time

FREEZE_ATTEMPTS = 5
FREEZE_BACKOFF_S = 0.2          # times the attempt number: 0.2, 0.4, 0.6, 0.8 s


def _retried(c, call: str, done_status: str, words: tuple[str, ...], sleep=time.sleep) -> None:
    from docker.errors import APIError
    for attempt in range(1, FREEZE_ATTEMPTS + 1):
        try:
            getattr(c, call)()
            return
        except APIError as e:
            c.reload()
            if c.status == done_status:
                return
            if not any(w in str(e).lower() for w in words) or attempt == FREEZE_ATTEMPTS:
                raise
            sleep(FREEZE_BACKOFF_S * attempt)


def freeze(c, sleep=time.sleep) -> None:
    """docker pause, retried while runc cannot freeze the cgroup in time."""
    _retried(c, "pause", "paused", ("freez",), sleep)


def thaw(c, sleep=time.sleep) -> None:
    """docker unpause, retried while runc cannot thaw the cgroup in time."""
    _retried(c, "unpause", "running", ("thaw", "freez"), sleep)
