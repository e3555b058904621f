"""Which transaction coordinator owns which __transaction_state partition, with coordinator epochs.

Design (eoslab's; Kafka's coordinators live in the brokers and take their
epoch from the partition's leader epoch):
- every transaction coordinator registers an ephemeral znode
  /eoslab/txn_coordinators/<id> with its address; its czxid is its session;
- the active controller keeps /eoslab/txn_coordinator_assignment: for each
  __transaction_state partition the owning coordinator (id, session,
  address) and a coordinator epoch; it changes an entry only when the owner
  is gone (znode deleted, or re-created by a new session) and then gives the
  partition to the live coordinator owning fewest partitions with the epoch
  bumped by one (an unowned partition keeps its last epoch, coordinator -1);
- the write is a ZooKeeper transaction that checks the controller epoch's
  znode version and the assignment's own version, so a stale controller
  cannot write it and two writes cannot interleave;
- coordinators and brokers watch the znode: a coordinator serves a partition
  only while the assignment names its id, session and epoch; brokers answer
  FindCoordinator from it; partition leaders refuse markers from an older
  coordinator epoch (TRANSACTION_COORDINATOR_FENCED).
"""
from __future__ import annotations

import logging

from kazoo.exceptions import NoNodeError, RolledBackError

from services.common import internal_topics as it
from services.common import zk_paths

log = logging.getLogger(__name__)


def live_coordinators(zk) -> dict[int, dict]:
    out = {}
    for child in zk.get_children(zk_paths.TXN_COORDINATORS):
        try:
            data, stat = zk.get(zk_paths.txn_coordinator_path(int(child)))
        except NoNodeError:
            continue
        d = zk_paths.decode(data)
        out[int(child)] = {"session": stat.czxid, "host": d["host"], "port": int(d["port"])}
    return out


def plan(num_partitions: int, current: dict[int, dict], live: dict[int, dict]) -> dict[int, dict]:
    """The new assignment: sticky for live owners up to an even share, least-loaded coordinator otherwise."""
    new: dict[int, dict] = {}
    load = {c: 0 for c in live}
    cap = -(-num_partitions // len(live)) if live else 0
    for p in range(num_partitions):
        cur = current.get(p)
        if cur is not None and cur["coordinator"] in live and live[cur["coordinator"]]["session"] == cur["session"] \
                and load[cur["coordinator"]] < cap:
            new[p] = dict(cur)
            load[cur["coordinator"]] += 1
    for p in range(num_partitions):
        if p in new:
            continue
        cur = current.get(p)
        epoch = cur["epoch"] if cur is not None else 0
        if not live:
            new[p] = {"coordinator": -1, "epoch": epoch, "session": -1, "host": "", "port": 0}
            continue
        c = min(live, key=lambda i: (load[i], (i - p) % 1000))
        load[c] += 1
        new[p] = {"coordinator": c, "epoch": epoch + 1, "session": live[c]["session"],
                  "host": live[c]["host"], "port": live[c]["port"]}
    return new


def reassign(controller) -> None:
    """Run on the controller's event thread when coordinators or the topic change."""
    if not controller.active:
        return
    n = len(controller.ctx.assignments.get(it.TRANSACTION_STATE_TOPIC, {}))
    if not n:
        return
    zk = controller.zk
    live = live_coordinators(zk)
    try:
        data, stat = zk.get(zk_paths.TXN_COORDINATOR_ASSIGNMENT)
        current = {int(p): a for p, a in (zk_paths.decode(data) or {}).get("partitions", {}).items()}
    except NoNodeError:
        current, stat = {}, None
    new = plan(n, current, live)
    if new == current:
        return
    payload = zk_paths.encode({"version": 1, "partitions": {str(p): a for p, a in new.items()}})
    tx = zk.transaction()
    tx.check(zk_paths.CONTROLLER_EPOCH, controller.epoch_zk_version)
    if stat is None:
        tx.create(zk_paths.TXN_COORDINATOR_ASSIGNMENT, payload)
    else:
        tx.set_data(zk_paths.TXN_COORDINATOR_ASSIGNMENT, payload, stat.version)
    results = tx.commit()
    if isinstance(results[0], Exception) and not isinstance(results[0], RolledBackError):
        from services.controller.context import Fenced
        raise Fenced()
    if isinstance(results[1], Exception):
        raise RuntimeError(f"transaction coordinator assignment changed underneath: {results[1]!r}")
    moved = {p: a["coordinator"] for p, a in new.items() if current.get(p, {}).get("epoch") != a["epoch"]}
    log.info("transaction coordinator assignment: %s (moved: %s)",
             {p: (a["coordinator"], a["epoch"]) for p, a in new.items()}, moved)
