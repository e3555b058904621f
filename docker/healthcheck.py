"""Container healthcheck for eoslab services: `eoslab-health broker|controller|txn-coordinator|tcp HOST:PORT`.

Guarantees: exit 0 only when the service answers. Until the first success
in this container's life it runs the full probe (`python -m services.probe`:
a broker answers Metadata and knows itself live; a controller answers
DescribeCluster; a transaction coordinator answers DescribeTransactions);
after that, a TCP connect suffices, so the check that runs
every second costs a bare Python start instead of importing gRPC (with 2
cores and two dozen containers the full probe every second would eat most
of the CPU the experiments need). Before the first success the full probe
runs only once the port accepts a connection, so a service still importing
its modules is not slowed down further by probes that cannot succeed yet. "This container's life" is keyed by the start
time of PID 1, so a killed and restarted service is fully probed again.
Runs with `python -S` (standard library only) on the fast path.

Checks never pile up: Docker does not kill a check that outlives its
timeout, so on a starved machine every interval would start another Python
and the pile would starve the machine further. One check runs at a time per
container (a non-blocking flock; a check that finds one running fails at
once), and the full probe is killed after PROBE_TIMEOUT_S.
"""
import fcntl
import os
import socket
import subprocess
import sys

MARKER = "/tmp/.eoslab-healthy"
LOCK = os.environ.get("EOSLAB_HEALTH_LOCK", "/tmp/.eoslab-health.lock")
PROBE_TIMEOUT_S = 3.0
PYTHON = "/opt/eoslab/bin/python"
TXN_PROBE = """
import sys, grpc
from eoslab.v1 import txn_pb2, txn_pb2_grpc
with grpc.insecure_channel(sys.argv[1]) as ch:
    txn_pb2_grpc.TransactionCoordinatorStub(ch).DescribeTransactions(txn_pb2.DescribeTransactionsRequest(), timeout=2)
"""
ROLES = ("broker", "controller", "txn-coordinator", "tcp")


def pid1_start() -> str:
    with open("/proc/1/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[19]   # field 22: starttime


def tcp_ok(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        return True
    except OSError:
        return False


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in ROLES:
        print(f"usage: eoslab-health {'|'.join(ROLES)} HOST:PORT", file=sys.stderr)
        return 2
    role, address = sys.argv[1], sys.argv[2]
    lock = open(LOCK, "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print("eoslab-health: the previous check is still running", file=sys.stderr)
        return 1
    if role == "tcp":
        return 0 if tcp_ok(address) else 1
    life = pid1_start()
    try:
        with open(MARKER) as f:
            if f.read() == life:
                return 0 if tcp_ok(address) else 1
    except OSError:
        pass
    if not tcp_ok(address):
        return 1
    cmd = [PYTHON, "-c", TXN_PROBE, address] if role == "txn-coordinator" else [PYTHON, "-m", "services.probe", role, address]
    try:
        if subprocess.run(cmd, stderr=subprocess.DEVNULL, timeout=PROBE_TIMEOUT_S).returncode != 0:
            return 1
    except subprocess.TimeoutExpired:       # run() has killed the probe
        return 1
    with open(MARKER, "w") as f:
        f.write(life)
    return 0


if __name__ == "__main__":
    sys.exit(main())
