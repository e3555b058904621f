"""The server-side assignors of consumer-protocol groups (KIP-848), named as `group.consumer.assignors`
names them: UniformAssignor ("uniform", the default) and RangeAssignor ("range").

Guarantees: `assign(members, topics)` gives every partition of a topic some member subscribes to, to
exactly one member that subscribes to it, and no partition of a topic nobody subscribes to.
- `members`: member id -> (subscribed topic ids, the member's previous target assignment);
- `topics`: topic id -> partition count;
- the answer: member id -> {topic id: set of partitions} (every member listed, possibly empty).
UniformAssignor balances: no member subscribing to a topic holds two partitions more than another
member that could take one of them; it is sticky: a partition stays with its previous owner unless
the balance needs it moved. RangeAssignor gives each topic's partitions in contiguous ranges to its
subscribers in member id order, the first ones one more when they do not divide evenly.
"""
from __future__ import annotations


class PartitionAssignor:
    name = ""

    def assign(self, members: dict, topics: dict) -> dict:
        raise NotImplementedError


class UniformAssignor(PartitionAssignor):
    name = "uniform"

    def assign(self, members: dict, topics: dict) -> dict:
        out = {m: {} for m in members}
        count = {m: 0 for m in members}
        owner: dict[tuple, str] = {}
        eligible = {t: sorted(m for m, (subs, _) in members.items() if t in subs) for t in topics}
        for m in sorted(members):                      # stickiness: previous owners keep what is still valid
            subs, previous = members[m]
            for t, ps in previous.items():
                if t in subs and t in topics:
                    for p in ps:
                        if p < topics[t] and (t, p) not in owner:
                            owner[(t, p)] = m
                            count[m] += 1
        everything = [(t, p) for t in sorted(topics, key=str) if eligible[t] for p in range(topics[t])]
        for tp in everything:                          # the rest to the least loaded subscriber
            if tp not in owner:
                m = min(eligible[tp[0]], key=lambda x: (count[x], x))
                owner[tp] = m
                count[m] += 1
        moved = True
        while moved:                                   # balance: each move lowers the sum of squares
            moved = False
            for tp in everything:
                m = owner[tp]
                least = min(eligible[tp[0]], key=lambda x: (count[x], x))
                if count[m] - count[least] > 1:
                    owner[tp] = least
                    count[m] -= 1
                    count[least] += 1
                    moved = True
        for (t, p), m in owner.items():
            out[m].setdefault(t, set()).add(p)
        return out


class RangeAssignor(PartitionAssignor):
    name = "range"

    def assign(self, members: dict, topics: dict) -> dict:
        out = {m: {} for m in members}
        for t, n in topics.items():
            subs = sorted(m for m, (subscribed, _) in members.items() if t in subscribed)
            if not subs:
                continue
            share, extra = divmod(n, len(subs))
            start = 0
            for i, m in enumerate(subs):
                size = share + (1 if i < extra else 0)
                if size:
                    out[m][t] = set(range(start, start + size))
                start += size
        return out


ASSIGNORS = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
DEFAULT_ASSIGNORS = ("uniform", "range")     # Kafka's group.consumer.assignors default; the first is used


def assignors(names=DEFAULT_ASSIGNORS) -> dict[str, PartitionAssignor]:
    """name -> assignor, in the configured order (an unknown name is a ValueError, as Kafka's config check)."""
    unknown = [n for n in names if n not in ASSIGNORS]
    if unknown:
        raise ValueError(f"unknown consumer group assignors {unknown} (known: {', '.join(ASSIGNORS)})")
    return {n: ASSIGNORS[n] for n in names}
