"""Kafka anomaly analyses over Jepsen-shaped histories (`eoslab check --model kafka`).

Guarantees: `check_kafka(history)` streams a history (a path, or a list of
`Op`s / dicts) and returns `{"valid", "anomalies", "allowed", "stats",
"realtime_lag"}` (see checker.kafka.check and checker.kafka.lag); every
anomaly carries a minimal witness naming its ops (by `index`), keys and
offsets. The history contract it reads — which the lab's workload writes —
is below. Rejected (HistoryError naming the line): a malformed line, an
index that is not greater than the one before (a duplicate), and an `ok`
send/poll/txn whose value does not have the shape below (the value missing
or not a list of micro-ops, a micro-op other than send/poll, a sent or
polled value that is not an int or a string, an offset that is not an int
or null): an acknowledgement the analysis cannot read could hide a lost
write. `info` and `fail` ops may carry what they could not know; their odd
parts, and missing optional fields, are skipped. Jepsen's rules and where
the lab departs from them: docs/checker.md.

History contract (JSONL, one op per line; Jepsen's Kafka workload shape)
-----------------------------------------------------------------------
Every op: `index` (int), `time` (ns, monotonic), `process` (int for clients,
"nemesis" for faults), `type` (invoke | ok | fail | info), `f`, `value`.
`k` is a key: one topic-partition (an int, or a string such as "t-0";
"3" and 3 are the same key). `v` is a value, unique per send (an int).

  f "send"   invoke [["send", k, v], ...]
             ok     [["send", k, [offset, v]], ...]   ([null, v] or v: offset unknown)
             fail / info: as the invoke, or with [offset or null, v]
  f "poll"   invoke [["poll"]]
             ok     [["poll", {k: [[offset, v], ...], ...}]]   (["poll"] alone: nothing)
  f "txn"    a mix of the two; ok = committed, fail = aborted, info = unknown
  f "assign" / "subscribe"   value [k, ...]; ok when the consumer took them.

`fail` means the op did not happen; `info` that it may have. The workload's
error table decides which (timeouts and NOT_LEADER_OR_FOLLOWER: info).

Extra fields (all optional; each anomaly says what it needs):

  "error": "NOT_LEADER_OR_FOLLOWER"     on fail/info ops; counted in stats.
  "producer": {"pid": 7, "epoch": 0, "session": "p3-1",
               "transactional_id": "t1" | null}
        on send/txn completions (invokes may carry it too; the completion
        counts): the producer id and epoch the records were sent with and
        the client's name for this producer instance (`session`; one per
        KafkaProducer object, new after a restart). Any ok op carrying it
        shows that (pid, epoch) was live at that point: a workload may log
        `{"f": "init-producer", "type": "ok", "producer": {...}}` after
        InitProducerId. Needed by producer-order (else the session is the
        process), pid-reuse and zombie-write.
  "seq": [12, 13, null, ...]
        parallel to `value`: the sequence number the producer gave each send
        micro-op's record in its partition (null for polls or unknown).
        Without it producer-order uses the order of invocation.
  "isolation": "read_committed" | "read_uncommitted"
        on poll/txn ops: the consumer's isolation level. zombie-write counts
        only read_committed polls; precommitted-read and G1c forgive
        read_uncommitted ones.
  "rebalance-log": [{"keys": [k, ...]}, ...]
        Jepsen's: partitions reassigned during the op (exempts them from
        int-poll-skip / int-nonmonotonic-poll).
  "seek-to-beginning": true
        on assign: the consumer restarts from offset 0 (forgets positions).

Nemesis ops: process "nemesis", an invoke and an info per fault action;
see checker.report_series for how fault intervals are read from them
(`start-<fault>` / `stop-<fault>` is the recommended naming).

What each anomaly needs beyond index/process/type/f/value
---------------------------------------------------------
  inconsistent-offsets, duplicate, lost-write, G1a, poll-skip,
  nonmonotonic-poll/send, int-*, G0, G1c      nothing (offsets in values)
  precommitted-read, G1c                       "isolation" only to forgive
                                               read_uncommitted polls
  producer-order                               "producer" (+ "seq", else
                                               invocation order)
  pid-reuse                                    "producer" with "session"
  zombie-write                                 "producer" on sends and on an
                                               ok op of the newer epoch;
                                               "isolation": "read_committed"
                                               on the polls
Which findings Kafka's model allows (reported under "allowed", not counted
in the verdict): G0, int-send-skip, G1c with a ww step, poll-skip and
nonmonotonic-poll of a subscribed consumer, precommitted-read / G1c at
read_uncommitted. Unseen records are in stats; `strict_unseen` counts them.
"""
from checker.kafka.check import MAX_WITNESSES, check_kafka
from checker.kafka.source import HistorySource

__all__ = ["check_kafka", "HistorySource", "MAX_WITNESSES"]
