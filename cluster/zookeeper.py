"""ZooKeeper as a local process, from Debian's `zookeeper` package and the machine's Java.

Guarantees: each cluster gets its own data directory, config, address and
port; `find_zookeeper_classpath` fails with one readable line that says what
to install when the package or Java is missing.
"""
from __future__ import annotations

import os
import shutil

DEBIAN_JAR = "/usr/share/java/zookeeper.jar"
DEBIAN_CONF = "/etc/zookeeper/conf"


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
    return [java_binary(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false", "-cp", find_zookeeper_classpath(),
            "org.apache.zookeeper.server.ZooKeeperServerMain", config_path]
