"""App faults: what the nemesis does to the user's application instances, beside the cluster's faults.

Guarantees: each package has the nemesis interface (cluster.nemesis_packages:
`start(ctx)` returns what it hit, `stop(ctx, started)` undoes it) and acts on
`ctx.apps` (cluster.apps.instances.AppInstances); the instance is drawn from
the run's seeded RNG. `kill-app` SIGKILLs an instance and starts a new
incarnation at the stop (a pod restarted); `kill-app-in-txn` first waits
until the output holds records of an open transaction. `pause-app` SIGSTOPs one for the
fault's duration (past the app's session and transaction timeouts when the
fault is long enough); `pause-app-in-txn` first waits until the instance
has a transaction open. `partition-app` cuts one off every node (local
runtime, root). `zombie-app` is what a StatefulSet does when a node goes
silent: the instance is cut off (paused where cutting is not possible), a
replacement with the same identity (the same EOSLAB_TRANSACTIONAL_ID) is
started at once, and at the stop the old one is let back; if the app uses
its transactional.id, Kafka fences the old one's writes. `APP_PACKAGES`
names them, `ALL_PACKAGES` is them and the cluster's packages together.
"""
from __future__ import annotations

import time

from cluster.nemesis_packages import PACKAGES, FaultPackage


class _AppFault(FaultPackage):
    def _instance(self, ctx) -> int:
        return ctx.rng.randrange(ctx.apps.count)


class KillApp(_AppFault):
    name = "kill-app"

    def start(self, ctx):
        i = self._instance(ctx)
        inc = ctx.apps.kill(i)
        return {"instance": i, "incarnation": inc.number} if inc is not None else None

    def stop(self, ctx, started):
        if started is not None:
            new = ctx.apps.start(started["instance"])
            return {**started, "restarted_as": new.number}
        return started


class KillAppInTransaction(KillApp):
    """kill-app timed to land inside a transaction that has written: it waits (at most WAIT_S) until a
    partition of the output has its last stable offset below its high watermark (records of an open
    transaction in the log, `ctx.offsets.probe()`), then kills, as a crash in the middle of a transaction
    would. It kills when the wait runs out all the same; the history's value holds the partitions it saw
    open ("open": [[partition, lso, hw], ...], empty when none). With one instance the open transaction
    is that instance's; with more, the drawn instance may not be the one holding it."""
    name = "kill-app-in-txn"
    WAIT_S = 10.0
    POLL_S = 0.02

    def start(self, ctx):
        deadline, open_ = time.monotonic() + self.WAIT_S, []
        while time.monotonic() < deadline:
            open_ = [s for s in ctx.offsets.probe() if s[1] < s[2]]
            if open_:
                break
            time.sleep(self.POLL_S)
        started = super().start(ctx)
        return {**started, "open": open_} if started is not None else None


class _HoldApp(_AppFault):
    """A fault held on one instance's current incarnation for its duration, undone at the stop."""
    def hold(self, ctx, inc) -> None:
        raise NotImplementedError

    def release(self, ctx, inc) -> None:
        raise NotImplementedError

    def start(self, ctx):
        return self.hold_instance(ctx, self._instance(ctx))

    def hold_instance(self, ctx, i: int):
        inc = ctx.apps.current.get(i)
        if inc is None or inc.exited.is_set():
            return None
        self.hold(ctx, inc)
        ctx.held_apps = {**getattr(ctx, "held_apps", {}), self.name: inc}
        return {"instance": i, "incarnation": inc.number}

    def stop(self, ctx, started):
        inc = getattr(ctx, "held_apps", {}).pop(self.name, None)
        if inc is not None:
            self.release(ctx, inc)
        return started


class PauseApp(_HoldApp):
    name = "pause-app"

    def hold(self, ctx, inc) -> None:
        ctx.apps.pause(inc)

    def release(self, ctx, inc) -> None:
        ctx.apps.resume(inc)


class PauseAppInTransaction(PauseApp):
    """pause-app timed to land inside a transaction: it waits (at most WAIT_S) until the instance's
    transactional.id has one open on its coordinator (DescribeTransactions), then pauses it there, as a
    stop-the-world pause in the middle of a transaction would. It pauses when the wait runs out all the
    same; the history's value says which state it saw last ("transaction")."""
    name = "pause-app-in-txn"
    OPEN = ("Ongoing", "PrepareCommit", "PrepareAbort")
    WAIT_S = 10.0
    POLL_S = 0.02

    def start(self, ctx):
        i = self._instance(ctx)
        transactional_id = ctx.transactional_ids()[i]
        deadline, state = time.monotonic() + self.WAIT_S, None
        while time.monotonic() < deadline:
            state = ctx.transaction_state(transactional_id)
            if state in self.OPEN:
                break
            time.sleep(self.POLL_S)
        started = self.hold_instance(ctx, i)
        return {**started, "transaction": state} if started is not None else None


class PartitionApp(_HoldApp):
    name = "partition-app"

    def hold(self, ctx, inc) -> None:
        ctx.apps.cut(inc)

    def release(self, ctx, inc) -> None:
        ctx.apps.uncut(inc)


class ZombieApp(_AppFault):
    name = "zombie-app"

    def start(self, ctx):
        i = self._instance(ctx)
        apps = ctx.apps
        old = apps.current.get(i)
        if old is None or old.exited.is_set():
            return None
        mode = "cut" if apps.can_cut() else "pause"
        apps.cut(old) if mode == "cut" else apps.pause(old)
        replaced = apps.replace(i)
        if replaced is None:             # it died meanwhile: nothing to replace
            apps.uncut(old) if mode == "cut" else apps.resume(old)
            return None
        ctx.zombie = (old, mode)
        return {"instance": i, "old": old.number, "new": replaced[1].number, "mode": mode}

    def stop(self, ctx, started):
        old, mode = getattr(ctx, "zombie", (None, None))
        if old is not None:
            ctx.apps.uncut(old) if mode == "cut" else ctx.apps.resume(old)
            ctx.zombie = None
        return started


APP_PACKAGES = {p.name: p for p in (KillApp(), KillAppInTransaction(), PauseApp(), PauseAppInTransaction(), PartitionApp(), ZombieApp())}
ALL_PACKAGES = {**PACKAGES, **APP_PACKAGES}
