"""What one `eoslab app run` is asked to do, and the checks on it before anything starts.

Guarantees: `AppRunConfig.validate()` raises ValueError with one readable
line for anything the run could not do (`--runtime k8s`, whose pods nothing
drives yet: K8S_REFUSED; an empty command, a count below 1,
an unknown fault package, a runtime other than local or docker, partition-app
without root, the same topic for input and output, an unknown Kafka
release, a `schedule_file` that cluster.run_schedule refuses or that names
a package that is neither an app fault nor a cluster fault); `events()` is
the schedule the run plays: the file's, when `schedule_file` is given,
else the one drawn from the seed; `seed_rate` is the input rate the seeder keeps (records per
second: all of them over 60 % of the time limit unless `rate` is given).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from cluster import nemesis as nem
from cluster.apps.faults import ALL_PACKAGES, APP_PACKAGES
from eoslab import kafka_version

NEEDS_CUT = ("partition-app",)
RUNTIMES = ("local", "docker")
# The k8s template (k8s/apps/) is validated offline only: nothing drives a StatefulSet's pods yet.
K8S_REFUSED = ("--runtime k8s is not implemented: the app harness cannot drive a StatefulSet's pods yet "
               "(k8s/apps/ is a template validated offline; docs/apps.md says what a real cluster needs)")


@dataclass
class AppRunConfig:
    cmd: str
    out: str
    instances: int = 3
    records: int = 10000
    keys: int = 100
    rate: float | None = None          # records per second; None: spread over 60 % of the time limit
    partitions: int = 3
    nemesis: list[str] = field(default_factory=list)
    time_limit: float = 60.0
    seed: int = 0
    kafka_version: str = kafka_version.DEFAULT
    cluster: str | None = None
    ordered: bool = False
    input_topic: str = "in"
    output_topic: str = "out"
    cwd: str | None = None
    quiet_s: float = 30.0
    drain_timeout_s: float = 120.0
    first_output_s: float = 60.0
    hang_threshold_s: float = 75.0
    fault_duration: tuple[float, float] = (5.0, 15.0)
    runtime: str = "local"             # where the cluster and the instances run: local processes or docker
    image: str | None = None           # docker: the instances' image (default: the cluster's eoslab image)
    statefulset: str | None = None     # k8s: the StatefulSet whose pods are the instances (refused for now)
    schedule_file: str | None = None   # play exactly these faults, not the seed's (cluster.run_schedule's format)

    def validate(self) -> None:
        if self.runtime == "k8s":
            raise ValueError(K8S_REFUSED)
        if self.statefulset is not None:
            raise ValueError("--statefulset is for --runtime k8s (the StatefulSet whose pods are the instances)")
        if not self.cmd.strip():
            raise ValueError("--cmd is empty: give the command that starts one instance of the application")
        for name, v, lo in (("--instances", self.instances, 1), ("--records", self.records, 1),
                            ("--keys", self.keys, 1), ("--partitions", self.partitions, 1)):
            if v < lo:
                raise ValueError(f"{name} must be at least {lo}, got {v}")
        unknown = [n for n in self.nemesis if n not in ALL_PACKAGES and n != "none"]
        if unknown:
            raise ValueError(f"unknown fault package(s) {', '.join(unknown)}; app faults: "
                             f"{', '.join(APP_PACKAGES)}; cluster faults: {', '.join(sorted(nem.PACKAGES))}")
        if self.time_limit <= 0:
            raise ValueError("--time-limit must be positive")
        if self.runtime not in RUNTIMES:
            raise ValueError(f"--runtime must be one of {', '.join(RUNTIMES)}, got {self.runtime!r}")
        if self.image is not None and self.runtime != "docker":
            raise ValueError("--image is for --runtime docker (the instances' container image)")
        played = self.nemesis + [e.package for e in self.events()]
        if any(n in NEEDS_CUT for n in played) and os.geteuid() != 0:
            raise ValueError("partition-app cuts an instance off with iptables: run as root (or leave it out)")
        if self.input_topic == self.output_topic:
            raise ValueError("the input and output topics must differ")
        kafka_version.get(self.kafka_version)

    def events(self) -> list[nem.Event]:
        """The faults the run plays: the schedule file's (ValueError with one line when it is refused),
        else the schedule drawn from the seed over the --nemesis packages."""
        if self.schedule_file:
            from cluster import run_schedule
            return run_schedule.load(self.schedule_file, self.time_limit, known=ALL_PACKAGES)
        return nem.schedule([n for n in self.nemesis if n != "none"], self.time_limit, self.seed,
                            duration=self.fault_duration)

    @property
    def seed_rate(self) -> float:
        return self.rate if self.rate else max(1.0, self.records / max(1.0, 0.6 * self.time_limit))


