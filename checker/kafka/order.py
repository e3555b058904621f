"""Order anomalies: poll-skip, nonmonotonic-poll/send and their int- forms.

Guarantees (Jepsen's definitions, computed on offsets; "delta" is the
distance in known records, Jepsen's index delta):
- int-poll-skip / int-nonmonotonic-poll: two consecutive records of one key
  in one op's polls skip known records (delta > 1) / do not advance
  (delta < 1). Keys in the op's `rebalance-log` are exempt.
- int-send-skip / int-nonmonotonic-send: two consecutive sends to one key in
  one op (ok, info or fail, as Jepsen) land with records of others between
  them / out of order. Positions are those of the log built from every ok
  send, every info send known to have committed and every poll: a send whose
  offset its own op does not give (info, fail, or acknowledged without one)
  is placed where polls saw its value.
- poll-skip / nonmonotonic-poll: a process's poll of a key starts past /
  at or before where its previous ok poll of that key ended (an ok or info
  assign/subscribe keeps only the keys still assigned: an info one may have
  taken effect; `seek-to-beginning` forgets them all).
- nonmonotonic-send: a process's send to a key lands, in that log, at or
  before its previous ok/info send to that key (same reset on
  assign/subscribe).
Witness: the key, the two values and offsets, the records skipped (at most
8), the delta, and the op (int-) or the two ops.
Kafka allows, and the verdict does not count (Jepsen's allowed list):
int-send-skip always; poll-skip and nonmonotonic-poll for a consumer that
subscribed (group rebalances move it). Jepsen decides that test-wide (the
test's `:sub-via`); the lab per consumer, from its last assign/subscribe,
because one history may mix assigned and subscribed consumers.
"""
from __future__ import annotations

from checker.kafka.offsets import MAX_LISTED, VersionOrder
from checker.kafka.witness import Finding, ref

ALLOW_INT_SEND_SKIP = ("Kafka does not isolate writes: other producers' records may land "
                       "between one transaction's sends (Jepsen allows int-send-skip)")
ALLOW_SUBSCRIBED = ("the consumer subscribed (group-managed): a rebalance may move its "
                    "position (Jepsen allows this with subscribe)")


def _intra(kind: str, rows: list, vo: VersionOrder, skip: bool,
           allowed: str | None = None) -> list[Finding]:
    out = []
    for row in rows:
        idx, k, o1, o2, v1, v2 = row[:6]
        if len(row) > 6 and row[6]:
            continue                       # rebalanced key
        data = {"key": k, "values": [v1, v2], "offsets": [o1, o2], "op": idx}
        if skip:
            between = vo.between(k, o1, o2)
            if not between:
                continue                   # only markers / unknown offsets in the gap
            data["delta"] = len(between) + 1
            data["skipped"] = vo.values(k, between)
        else:
            data["delta"] = vo.delta(k, o1, o2)
        out.append(Finding(kind, data, [ref(idx, k, o1, o2)], allowed))
    return out


def _across(kind: str, rows: list, vo: VersionOrder, skip: bool,
            allow_subscribed: bool) -> list[Finding]:
    out = []
    for row in rows:
        i0, i1, k, o0, o1, v0, v1 = row[:7]
        sub = row[7] if len(row) > 7 else False
        data = {"key": k, "values": [v0, v1], "offsets": [o0, o1]}    # "ops": added by materialize
        if skip:
            between = vo.between(k, o0, o1)
            if not between:
                continue
            data["delta"] = len(between) + 1
            data["skipped"] = vo.values(k, between)
        else:
            data["delta"] = vo.delta(k, o0, o1)
        out.append(Finding(kind, data, [ref(i0, k, o0), ref(i1, k, o1)],
                           ALLOW_SUBSCRIBED if (sub and allow_subscribed) else None))
    return out


def _place_late(c) -> tuple[list, list, list]:
    """Send pairs kept by value (info/fail sends, sends without offsets) placed in the
    log: (int-nonmonotonic-send rows, int-send-skip rows, nonmonotonic-send rows).
    A value the log does not hold places nothing (Jepsen's delta of 1)."""
    keys = c.keys
    int_nm, int_gaps, nm = [], [], []
    for idx, k, v1, v2 in c.int_send_late:
        v2o = keys[k].val2off
        o1, o2 = v2o.get(v1), v2o.get(v2)
        if o1 is None or o2 is None:
            continue
        if o2 <= o1:
            int_nm.append((idx, k, o1, o2, v1, v2))
        elif o2 > o1 + 1:
            int_gaps.append((idx, k, o1, o2, v1, v2))
    for i0, i1, k, v0, v1 in c.nm_send_late:
        v2o = keys[k].val2off
        o0, o1 = v2o.get(v0), v2o.get(v1)
        if o0 is not None and o1 is not None and o1 <= o0:
            nm.append((i0, i1, k, o0, o1, v0, v1))
    return int_nm, int_gaps, nm


def order_findings(c, vo: VersionOrder) -> list[Finding]:
    """All order anomalies of a finished Collector `c`."""
    int_nm, int_gaps, nm = _place_late(c)
    return (_intra("int-poll-skip", c.int_poll_gaps, vo, True)
            + _intra("int-nonmonotonic-poll", c.int_nm_poll, vo, False)
            + _intra("int-send-skip", c.int_send_gaps + int_gaps, vo, True, ALLOW_INT_SEND_SKIP)
            + _intra("int-nonmonotonic-send", c.int_nm_send + int_nm, vo, False)
            + _across("poll-skip", c.poll_gaps, vo, True, True)
            + _across("nonmonotonic-poll", c.nm_poll, vo, False, True)
            + _across("nonmonotonic-send", c.nm_send + nm, vo, False, False))


__all__ = ["order_findings", "MAX_LISTED"]
