"""What ListGroups and DescribeGroups tell of the groups a broker coordinates (Kafka's
GroupCoordinator.handleListGroups / handleDescribeGroups and ClassicGroup.summary).

Guarantees: a broker lists every group of the __consumer_offsets partitions it leads: groups with
members, groups known only by their committed offsets (Empty, no protocol type), as Kafka loads
both, and consumer-protocol (KIP-848) groups with their state; a state filter keeps the groups in those states, a type filter (ListGroups v5, case-insensitive) those of
those types. A described group of another broker is
NOT_COORDINATOR; an unknown one is "Dead" with no error, as in Kafka. A Stable group shows its
protocol and each member's metadata for that protocol and its assignment as the leader sent them; a
group in any other state shows its members without metadata or assignment and no protocol.
"""
from __future__ import annotations

from eoslab.common.errors import E
from services.broker import group_protocols
from services.broker.membership import EMPTY, STABLE

DEAD = "Dead"
CLASSIC, CONSUMER = "classic", "consumer"     # KIP-848 group types (ListGroups v5)


def list_groups(gc, states_filter=(), types_filter=()) -> list[tuple[str, str, str, str]]:
    """(group id, protocol type, state, group type) of every group this broker coordinates; the group
    type is KIP-848's: "consumer" for a consumer-protocol group, "classic" for the others."""
    led = gc.led_partition_states()
    found: dict[str, tuple[str, str, str]] = {}
    for st in led.values():
        for g in set(st.offsets) | {g for g, meta in st.groups.items() if meta is not None}:
            found[g] = ("", str(EMPTY), CLASSIC)
    with gc.membership.cond:
        for g, grp in gc.membership.groups.items():
            if gc.partition_for(g) not in led:
                continue
            if grp.members:
                found[g] = (grp.protocol_type, str(grp.state), CLASSIC)
            elif g in found or grp.protocol_type:
                found[g] = (grp.protocol_type, str(EMPTY), CLASSIC)
    with gc.consumer_groups.lock:            # KIP-848 groups: type "consumer", Empty/Assigning/Reconciling/Stable
        for g, cg in gc.consumer_groups.groups.items():
            if gc.partition_for(g) in led:
                found[g] = (cg.protocol_type, str(cg.state), CONSUMER)
    states = {s.lower() for s in states_filter}
    types = {t.lower() for t in types_filter}
    return sorted((g, t, s, k) for g, (t, s, k) in found.items()
                  if (not states or s.lower() in states) and (not types or k in types))


def describe_group(gc, group: str) -> tuple[int, dict]:
    """(error, Kafka's DescribedGroup fields but the group id) for one group."""
    err, _, st = gc.partition_state(group)
    if err != E.NONE:
        return err, {"group_state": "", "protocol_type": "", "protocol_data": "", "members": []}
    with gc.membership.cond:
        g = gc.membership.groups.get(group)
        if g is None or not g.members:
            known = g is not None or group in st.offsets or st.groups.get(group) is not None
            return E.NONE, {"group_state": str(EMPTY) if known else DEAD,
                            "protocol_type": g.protocol_type if g is not None else "", "protocol_data": "",
                            "members": []}
        stable = g.state == STABLE
        members = []
        for m in g.members.values():
            data = group_protocols.assignment_bytes(g.protocol_type, m)
            members.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id or None,
                            "client_id": m.client_id,
                            "client_host": "",
                            "member_metadata": group_protocols.metadata_for(m.protocols, g.protocol) if stable
                            else b"",
                            "member_assignment": data if stable else b""})
        return E.NONE, {"group_state": str(g.state), "protocol_type": g.protocol_type,
                        "protocol_data": g.protocol if stable else "", "members": members}
