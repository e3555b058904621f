"""`python -m services.sidecar.ctl VERB ...`: drive a sidecar from a shell (kubectl exec, docker exec).

Guarantees: talks to the sidecar at --address (default 127.0.0.1:9191, the
one in this pod/namespace) with the token from --token or
$EOSLAB_SIDECAR_TOKEN; prints the rules in force afterwards as one JSON
object; a refusal prints `sidecar: CODE: message` on stderr and exits 1.

  partition PEER... [--direction both|inbound|outbound]
  loss PROBABILITY [PEER...]        reset [PEER...] [--port N]
  bandwidth BITS_PER_S [PEER...]    drop-responses [PEER...] [--port N]
  delay MS [PEER...] [--jitter MS]  heal    rules
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from google.protobuf.json_format import MessageToDict

from services.sidecar.client import SidecarClient, SidecarError


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m services.sidecar.ctl")
    p.add_argument("--address", default="127.0.0.1:9191")
    p.add_argument("--token", default=os.environ.get("EOSLAB_SIDECAR_TOKEN", ""))
    p.add_argument("--direction", default="both", choices=["both", "inbound", "outbound"])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--jitter", type=int, default=0)
    p.add_argument("verb", choices=["partition", "loss", "reset", "bandwidth", "drop-responses", "delay",
                                    "heal", "rules"])
    p.add_argument("args", nargs="*")
    a = p.parse_args(argv)
    if not a.token:
        p.error("no token: pass --token or set EOSLAB_SIDECAR_TOKEN")

    def number(kind):
        if not a.args:
            p.error(f"{a.verb} needs a value first")
        try:
            return kind(a.args[0]), a.args[1:]
        except ValueError:
            p.error(f"{a.verb}: {a.args[0]!r} is not a number")

    with SidecarClient(a.address, a.token) as c:
        try:
            if a.verb == "partition":
                r = c.partition(a.args, a.direction)
            elif a.verb == "loss":
                prob, peers = number(float)
                r = c.loss(prob, peers, a.direction)
            elif a.verb == "reset":
                r = c.reset(a.args, a.direction, a.port)
            elif a.verb == "bandwidth":
                rate, peers = number(int)
                r = c.bandwidth(rate, peers)
            elif a.verb == "drop-responses":
                r = c.drop_responses(a.args, a.port)
            elif a.verb == "delay":
                ms, peers = number(int)
                r = c.delay(ms, a.jitter, peers, a.direction)
            elif a.verb == "heal":
                r = c.heal()
            else:
                r = c.rules()
        except SidecarError as e:
            print(f"sidecar: {e}", file=sys.stderr)
            return 1
    print(json.dumps(MessageToDict(r, preserving_proto_field_name=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
