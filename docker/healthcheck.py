"""Container healthcheck for eoslab services: `eoslab-health broker|controller|tcp HOST:PORT`.

Guarantees: exit 0 only when the service answers. Until the first success
in this container's life it runs the full probe (`python -m services.probe`:
a broker answers Metadata and knows itself live; a controller answers
DescribeCluster); after that, a TCP connect suffices, so the check that runs
every second costs a bare Python start instead of importing gRPC (with 2
cores and a dozen containers the full probe every second would eat most of
the CPU the experiments need). "This container's life" is keyed by the start
time of PID 1, so a killed and restarted service is fully probed again.
Runs with `python -S` (standard library only) on the fast path.
"""
import os
import socket
import subprocess
import sys

MARKER = "/tmp/.eoslab-healthy"


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
    if len(sys.argv) != 3 or sys.argv[1] not in ("broker", "controller", "tcp"):
        print("usage: eoslab-health broker|controller|tcp HOST:PORT", file=sys.stderr)
        return 2
    role, address = sys.argv[1], sys.argv[2]
    if role == "tcp":
        return 0 if tcp_ok(address) else 1
    life = pid1_start()
    try:
        with open(MARKER) as f:
            if f.read() == life:
                return 0 if tcp_ok(address) else 1
    except OSError:
        pass
    if subprocess.run(["/opt/eoslab/bin/python", "-m", "services.probe", role, address]).returncode != 0:
        return 1
    with open(MARKER, "w") as f:
        f.write(life)
    return 0


if __name__ == "__main__":
    sys.exit(main())
