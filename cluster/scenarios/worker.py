"""A producer in its own OS process, so a scenario can SIGKILL or SIGSTOP the client itself.

Guarantees: `WorkerProducer` offers the calls of KafkaProducer that the
scenarios use (init_transactions, begin_transaction, send -> future,
commit_transaction, abort_transaction, producer_id, producer_epoch, close)
and forwards each, in order, as one JSON line to `python -m
cluster.scenarios.worker`, which runs a real KafkaProducer and answers one
JSON line per request. Kafka errors come back as KafkaError with the same
code. Once the process is killed, every call and every unresolved future
raises WorkerGone (the outcome is unknown: `info`); the last producer id and
epoch it reported stay readable. `kill`/`pause`/`resume` signal only the
process this object started.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class WorkerGone(RuntimeError):
    """The worker process is dead: what it was doing has an unknown outcome."""


class RemoteFuture:
    def __init__(self, worker: "WorkerProducer", fid: int):
        self.worker, self.fid = worker, fid

    def result(self, timeout: float | None = None):
        from clients.producer import RecordMetadata
        r = self.worker._call({"cmd": "result", "future": self.fid, "timeout": timeout},
                              wait=(60.0 if timeout is None else timeout) + 10)
        return RecordMetadata(r["topic"], r["partition"], r["offset"], r["seq"], r["record_pid"], r["record_epoch"])


class WorkerProducer:
    def __init__(self, bootstrap: str, config: dict):
        from clients.producer import ProducerConfig
        self.config = ProducerConfig(**config)            # validated here, before a process starts
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen([sys.executable, "-m", "cluster.scenarios.worker", "--bootstrap", bootstrap,
                                     "--config", json.dumps(config)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                                    cwd=REPO)
        self.replies: queue.Queue = queue.Queue()
        self.producer_id, self.producer_epoch = -1, -1
        self._ids = 0
        threading.Thread(target=self._read, daemon=True).start()
        self._call({"cmd": "ready"}, wait=60)

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.replies.put(json.loads(line))
            except ValueError:
                continue
        self.replies.put(None)

    def _call(self, req: dict, wait: float = 90.0) -> dict:
        from eoslab.common.errors import KafkaError
        if self.proc.poll() is not None:
            raise WorkerGone(f"producer process {self.proc.pid} is gone")
        self._ids += 1
        req["id"] = self._ids
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise WorkerGone(f"producer process {self.proc.pid} is gone") from None
        while True:
            try:
                r = self.replies.get(timeout=wait)
            except queue.Empty:
                raise TimeoutError(f"producer process did not answer {req['cmd']} in {wait:.0f} s") from None
            if r is None:
                self.replies.put(None)
                raise WorkerGone(f"producer process {self.proc.pid} is gone")
            if r.get("id") == req["id"]:
                break
        if "pid" in r:
            self.producer_id, self.producer_epoch = r["pid"], r["epoch"]
        if "error_code" in r:
            raise KafkaError(r["error_code"], r.get("message", ""))
        if "exception" in r:
            raise RuntimeError(r["exception"])
        return r

    # -- KafkaProducer's calls -------------------------------------------------------------------
    def init_transactions(self) -> None:
        self._call({"cmd": "init_transactions"})

    def begin_transaction(self) -> None:
        self._call({"cmd": "begin_transaction"})

    def send(self, topic: str, value: bytes, partition: int) -> RemoteFuture:
        r = self._call({"cmd": "send", "topic": topic, "value": value.decode(), "partition": partition})
        return RemoteFuture(self, r["future"])

    def commit_transaction(self) -> None:
        self._call({"cmd": "commit_transaction"})

    def abort_transaction(self) -> None:
        self._call({"cmd": "abort_transaction"})

    def state(self) -> tuple[int, int]:
        self._call({"cmd": "state"})
        return self.producer_id, self.producer_epoch

    # -- the process -------------------------------------------------------------------------
    def _signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        self.proc.wait(10)

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.resume()
            try:
                self._call({"cmd": "close"}, wait=15)
            except (WorkerGone, TimeoutError, RuntimeError):
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


# -- the worker process ----------------------------------------------------------------------------
def serve(bootstrap: str, config: dict) -> None:
    from eoslab.common.errors import KafkaError
    from clients.producer import KafkaProducer, ProducerConfig
    p = KafkaProducer(bootstrap, ProducerConfig(**config))
    futures: dict[int, object] = {}

    def reply(req: dict, **kw) -> None:
        kw.update(id=req.get("id"), pid=p.producer_id, epoch=p.producer_epoch)
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        req = json.loads(line)
        cmd = req.get("cmd")
        try:
            if cmd == "send":
                fut = p.send(req["topic"], req["value"].encode(), partition=req["partition"])
                futures[len(futures)] = fut
                reply(req, future=len(futures) - 1)
            elif cmd == "result":
                m = futures[req["future"]].result(timeout=req.get("timeout"))
                reply(req, topic=m.topic, partition=m.partition, offset=m.offset, seq=m.base_sequence,
                      record_pid=m.producer_id, record_epoch=m.producer_epoch)
            elif cmd in ("init_transactions", "begin_transaction", "commit_transaction", "abort_transaction"):
                getattr(p, cmd)()
                reply(req)
            elif cmd in ("ready", "state"):
                reply(req)
            elif cmd == "close":
                reply(req)
                break
            else:
                reply(req, exception=f"unknown command {cmd!r}")
        except KafkaError as e:
            reply(req, error_code=e.code, message=e.message)
        except Exception as e:  # noqa: BLE001 - answered, not fatal to the worker
            reply(req, exception=f"{type(e).__name__}: {e}")
    p.close(5)


def main() -> None:
    import argparse
    ap = argparse.ArgumentParser(description="a producer driven over stdin/stdout (eoslab scenarios)")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--config", required=True, help="ProducerConfig fields as a JSON object")
    a = ap.parse_args()
    serve(a.bootstrap, json.loads(a.config))


if __name__ == "__main__":
    main()
