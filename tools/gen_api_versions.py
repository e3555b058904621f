"""Write eoslab/kafka_api_versions.json: the request versions each emulated Kafka release serves, read
from Kafka's own source at that release's tag (its request schemas: the message JSON files from 2.4 on,
Protocol.java's schema arrays before), so the lab's brokers advertise in ApiVersions what that release
advertised and no more.

Usage: python tools/gen_api_versions.py [--kafka-repo PATH] [--check]
The Kafka repository is a clone with tags (default: the snapshot under /work/.mirror). 4.0 is not
listed: the lab's own served ranges are its 4.0 (the snapshot predates the 4.0.0 tag).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "eoslab", "kafka_api_versions.json")
MIRROR = "/work/.mirror/apache+kafka/repo"
TAGS = {"0.11": "0.11.0.3-rc0", "2.5": "2.5.1", "3.0": "3.0.2", "3.6": "3.6.2"}   # 0.11.0.3's rc0 is its code
MESSAGES = "clients/src/main/resources/common/message"
PROTOCOL_JAVA = "clients/src/main/java/org/apache/kafka/common/protocol/Protocol.java"
API_KEYS_JAVA = "clients/src/main/java/org/apache/kafka/common/protocol/ApiKeys.java"


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout


def from_messages(repo: str, tag: str) -> dict[int, list[int]]:
    out = {}
    for name in git(repo, "ls-tree", "--name-only", f"{tag}:{MESSAGES}").split():
        if not name.endswith("Request.json"):
            continue
        text = git(repo, "show", f"{tag}:{MESSAGES}/{name}")
        key = re.search(r'"apiKey"\s*:\s*(\d+)', text)
        versions = re.search(r'"validVersions"\s*:\s*"(\d+)(?:-(\d+))?"', text)
        if key and versions:
            lo = int(versions.group(1))
            hi = int(versions.group(2) or lo)
            # a latest version marked unstable is not advertised unless unstable.api.versions.enable is set
            # (3.6's ConsumerGroupHeartbeat v0 and OffsetCommit v9, KIP-848 in development)
            if re.search(r'"latestVersionUnstable"\s*:\s*true', text):
                hi -= 1
            if hi >= lo:
                out[int(key.group(1))] = [lo, hi]
    return out


def from_protocol_java(repo: str, tag: str) -> dict[int, list[int]]:
    keys = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s+([A-Z_]+)\((\d+), ",
                                                               git(repo, "show", f"{tag}:{API_KEYS_JAVA}"), re.M)}
    text = git(repo, "show", f"{tag}:{PROTOCOL_JAVA}")
    arrays = {m.group(1): [x.strip() for x in m.group(2).split(",")]
              for m in re.finditer(r"public static final Schema\[\] ([A-Z_]+) = (?:new Schema\[\] )?\{([^}]*)\};",
                                   text, re.S)}
    out = {}
    for m in re.finditer(r"REQUESTS\[ApiKeys\.([A-Z_]+)\.id\] = ([A-Z_]+);", text):
        entries = arrays[m.group(2)]
        present = [i for i, e in enumerate(entries) if e and e != "null"]
        out[keys[m.group(1)]] = [present[0], present[-1]]
    return out


def table(repo: str) -> dict:
    releases = {}
    for release, tag in TAGS.items():
        listed = git(repo, "ls-tree", "--name-only", tag, MESSAGES).split()
        versions = from_messages(repo, tag) if listed else from_protocol_java(repo, tag)
        releases[release] = {"tag": tag, "requests": {str(k): v for k, v in sorted(versions.items())}}
    return {"source": "apache/kafka request schemas at each tag (tools/gen_api_versions.py)", "releases": releases}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kafka-repo", default=MIRROR)
    p.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    a = p.parse_args(argv)
    try:
        text = json.dumps(table(a.kafka_repo), indent=1, sort_keys=True) + "\n"
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        print(f"gen_api_versions: cannot read the Kafka repository {a.kafka_repo}: {e}", file=sys.stderr)
        return 2
    if a.check:
        return 0 if open(OUT).read() == text else 1
    open(OUT, "w").write(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
