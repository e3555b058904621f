"""ZooKeeper as a local process, from Debian's `zookeeper` package and the machine's Java.

Guarantees: each cluster gets its own data directory, config, address and
port; `find_zookeeper_classpath` fails with one readable line that says what
to install when the package or Java is missing. ZooKeeper logs to its
stderr (the node's log) through log4j with the container image's settings
(docker/zookeeper/log4j.properties) where Debian's slf4j binding is
installed, so a ZooKeeper that exits says why.

ZooKeeper 3.8 fsyncs its transaction log before it answers (forceSync) but
never its snapshots (`ZooKeeperServer.takeSnapshot(syncSnap=false)`, also the
empty one it writes at its first start). A power loss that drops that first
snapshot leaves a complete, fsynced log and no snapshot, and ZooKeeper then
refuses to start ("No snapshot found, but there are log entries. Something is
broken!", ZOOKEEPER-3056) although it could replay the log from zxid 0. Every
ZooKeeper of the lab runs with ZooKeeper's own escape hatch for that,
`zookeeper.snapshot.trust.empty=true` (TRUST_EMPTY_SNAPSHOT), so a
whole-cluster power loss tests Kafka's recovery, not that trap; a ZooKeeper
with a snapshot recovers exactly as without it.
"""
from __future__ import annotations

import os
import shutil

DEBIAN_JAR = "/usr/share/java/zookeeper.jar"
DEBIAN_CONF = "/etc/zookeeper/conf"
LOG4J_JARS = ("/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar")   # Debian's, with zookeeper
LOG4J_PROPERTIES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "docker", "zookeeper", "log4j.properties")
TRUST_EMPTY_SNAPSHOT = "-Dzookeeper.snapshot.trust.empty=true"


class ZooKeeperMissing(RuntimeError):
    pass


def java_binary() -> str:
    java = shutil.which("java") or ("/usr/bin/java" if os.path.exists("/usr/bin/java") else None)
    if java is None:
        raise ZooKeeperMissing("Java is not installed: run `make cluster-up` (it installs Debian's "
                               "openjdk-17-jre-headless) or `apt-get install openjdk-17-jre-headless`")
    return java


def find_zookeeper_classpath() -> str:
    jar = os.environ.get("EOSLAB_ZOOKEEPER_JAR", DEBIAN_JAR)
    if not os.path.exists(jar):
        raise ZooKeeperMissing(f"ZooKeeper is not installed ({jar} missing): run `make cluster-up` "
                               "or `apt-get install zookeeper`")
    conf = DEBIAN_CONF if os.path.isdir(DEBIAN_CONF) else ""
    return f"{conf}:{jar}" if conf else jar


def write_config(directory: str, host: str, port: int, tick_ms: int = 200) -> str:
    data = os.path.join(directory, "data")
    os.makedirs(data, exist_ok=True)
    path = os.path.join(directory, "zoo.cfg")
    with open(path, "w") as f:
        f.write(f"tickTime={tick_ms}\n"
                f"dataDir={data}\n"
                f"clientPort={port}\n"
                f"clientPortAddress={host}\n"
                "maxClientCnxns=0\n"
                "admin.enableServer=false\n"
                f"minSessionTimeout={2 * tick_ms}\n"
                "maxSessionTimeout=60000\n"
                "4lw.commands.whitelist=ruok,srvr,stat\n"
                "autopurge.purgeInterval=0\n")
    return path


def command(config_path: str) -> list[str]:
    cp, logging = find_zookeeper_classpath(), []
    if all(os.path.exists(j) for j in LOG4J_JARS) and os.path.exists(LOG4J_PROPERTIES):
        cp, logging = ":".join([cp, *LOG4J_JARS]), [f"-Dlog4j.configuration=file:{LOG4J_PROPERTIES}"]
    return [java_binary(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false", TRUST_EMPTY_SNAPSHOT, *logging, "-cp", cp,
            "org.apache.zookeeper.server.ZooKeeperServerMain", config_path]
