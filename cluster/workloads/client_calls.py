"""A real client's blocking call, bounded from outside as Jepsen bounds every client operation.

Guarantees: `bounded_call(fn, limit_s, what)` returns what `fn()` returns or
raises what it raises when it ends within `limit_s`; when it does not, it
raises `ClientCallHung` at `limit_s`, leaving the call to finish (or not) on
a daemon thread of its own, so the worker that asked goes on. The caller
then treats the client as Jepsen treats a process whose operation timed out:
the operation's outcome is decided from what was asked of the system (the
caller's own rule), and the client object is never used again.

Why: a client library can block past the timeout it was given. What librdkafka's source shows
(the hang was seen with py-spy, not caught in a debug log):
librdkafka's send_offsets_to_transaction waits without a bound for its
internal request (`rd_kafka_txn_op_req1(..., RD_POLL_INFINITE)`, "timeout is
enforced by op_send_offsets_to_transaction()"), and its coordinator lookup
is dropped, never answered, when FindCoordinator gets
COORDINATOR_NOT_AVAILABLE more often than the request's two retries allow
(`rd_kafka_coord_req_handle_FindCoordinator` ignores `rd_kafka_buf_retry`'s
refusal), which Kafka answers while a group's __consumer_offsets partition
has no live leader: the call then never returns.
"""
from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class ClientCallHung(TimeoutError):
    """The client's call did not return within the bound the harness gives it."""


def bounded_call(fn, limit_s: float, what: str):
    done = threading.Event()
    box: dict = {}

    def call():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller as it was raised
            box["error"] = e
        finally:
            done.set()
    threading.Thread(target=call, daemon=True, name=f"client-call-{what}").start()
    if not done.wait(limit_s):
        log.warning("%s did not return within %.0f s: the client is left behind", what, limit_s)
        raise ClientCallHung(f"{what} did not return within {limit_s:.0f} s (the client's own timeout was "
                             f"shorter): the client hung")
    if "error" in box:
        raise box["error"]
    return box.get("value")
