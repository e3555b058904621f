"""ChangeNotificationListener: Kafka's ZkNodeChangeNotificationListener, the one way a broker learns of a
change another broker wrote to ZooKeeper (entity configs under `/config/changes`, ACLs under
`/kafka-acl-changes` and `/kafka-acl-extended-changes`).

Guarantees:
- notifications are the sequential children of one path (`<prefix><10-digit sequence>`); each one
  created after `start()` took its snapshot is handed to `process(data)` once, in sequence order (the
  owner loads its whole state after `start()`, so no change falls between that load and the first
  notification processed);
- every `process` call runs on the listener's own thread, one at a time: a burst of notifications
  is one pass on that thread, never a thread each, and kazoo's event thread never waits on a handler;
- a pass that fails on ZooKeeper keeps its place and is retried after `retry_s` (the notifications
  stay in ZooKeeper); a handler's own exception is logged and that notification is passed over;
- notifications older than `expiration_ms` (Kafka's changeExpirationMs, 15 minutes) by the wall clock
  are deleted after a pass, as Kafka purges them, so the path does not grow without bound; a
  notification's creation time is asked of ZooKeeper once (it never changes), not on every pass.

`config_change_handler` is Kafka's ConfigChangeNotificationHandler (ZkConfigManager): it reads a
`/config/changes` notification's `entity_path` (`<type>/<name>`, version 2) and calls the handler
registered for that entity type with the entity's name (unsanitized where it was sanitized).
"""
from __future__ import annotations

import json
import logging
import threading
from typing import Callable

from kazoo.exceptions import KazooException, NoNodeError, ZookeeperError

from eoslab.common.time import SYSTEM, Time
from services.common import zk_paths

log = logging.getLogger(__name__)
EXPIRATION_MS = 15 * 60 * 1000


def _sequence(child: str) -> int:
    digits = child[-10:]
    return int(digits) if digits.isdigit() else -1


class ChangeNotificationListener:
    def __init__(self, zk, path: str, process: Callable[[bytes], None], name: str, time: Time = SYSTEM,
                 expiration_ms: int = EXPIRATION_MS, retry_s: float = 1.0):
        self.zk, self.path, self.process, self.name = zk, path, process, name
        self.time, self.expiration_ms, self.retry_s = time, expiration_ms, retry_s
        self.last = -1                      # the sequence of the last notification processed (or skipped at start)
        self._ctimes: dict[str, int] = {}   # notification -> its creation time (ms), as ZooKeeper gave it
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Take the snapshot (notifications already there are passed over: the owner loads everything next),
        retried through a connection loss as Kafka's ZooKeeperClient retries (a broker that starts while
        ZooKeeper is out of reach waits for it instead of exiting)."""
        retry = zk_paths.retrying(self.zk)
        retry(self.zk.ensure_path, self.path)
        self.last = max((_sequence(c) for c in retry(self.zk.get_children, self.path)), default=-1)
        self._thread.start()
        self.zk.ChildrenWatch(self.path, self._on_children, send_event=False)

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    def _on_children(self, _children) -> bool | None:
        if self._closed:
            return False                    # kazoo: stop watching
        self._wake.set()
        return None

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait()
            self._wake.clear()
            if self._closed:
                return
            try:
                self.process_pending()
            except (KazooException, ZookeeperError) as e:
                log.warning("%s: notifications under %s not read (%s): retrying", self.name, self.path, e)
                self.time.sleep(self.retry_s)
                self._wake.set()

    def process_pending(self) -> int:
        """One pass: every notification after `last`, in order; then the purge. Answers how many were handled."""
        children = sorted((c for c in self.zk.get_children(self.path) if _sequence(c) >= 0), key=_sequence)
        handled = 0
        for child in children:
            seq = _sequence(child)
            if seq <= self.last:
                continue
            try:
                data, stat = self.zk.get(f"{self.path}/{child}")
                self._ctimes[child] = stat.ctime
            except NoNodeError:
                data = None                 # purged by another broker: its change is older than the load
            if data is not None:
                try:
                    self.process(data)
                except (KazooException, ZookeeperError):
                    raise                   # keep `last`: the pass is retried
                except Exception:           # noqa: BLE001 - one bad notification must not stop the others
                    log.exception("%s: notification %s not applied", self.name, child)
            self.last = seq
            handled += 1
        self._purge(children)
        return handled

    def _purge(self, children: list[str]) -> None:
        oldest = self.time.milliseconds() - self.expiration_ms
        present = set(children)
        self._ctimes = {c: t for c, t in self._ctimes.items() if c in present}
        for child in children:
            if _sequence(child) > self.last:
                break
            try:
                ctime = self._ctimes.get(child)
                if ctime is None:           # there before the snapshot: never read
                    stat = self.zk.exists(f"{self.path}/{child}")
                    if stat is None:
                        continue
                    ctime = self._ctimes[child] = stat.ctime
                if ctime < oldest:
                    self._ctimes.pop(child, None)
                    self.zk.delete(f"{self.path}/{child}")
            except NoNodeError:
                pass                        # another broker purged it first


def config_change_handler(handlers: dict[str, Callable[[str], None]]) -> Callable[[bytes], None]:
    """process(data) for `/config/changes`: the entity type's handler gets the entity's (unsanitized) name."""
    from services.common.entity_configs import UNSANITIZED, desanitize

    def process(data: bytes) -> None:
        note = json.loads(data or b"{}")
        entity_path = note.get("entity_path", "")
        entity_type, _, name = entity_path.partition("/")
        handler = handlers.get(entity_type)
        if handler is not None and name:
            handler(name if entity_type in UNSANITIZED else desanitize(name))
    return process
