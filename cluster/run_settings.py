"""A run's `--set` settings, split once by who they configure.

Guarantees: every setting lands in exactly one place, by its prefix:
broker.* / coordinator.* / controller.* become that service's command-line
flags (true -> --name, false -> --no-name, else --name=value; later ones
win, as argparse reads them), topic.* the topic's configs, workload.* the
workload's options, isolation.level the consumer's, and everything else the
producer's properties. The Kafka release a run behaves as reaches the
brokers, controllers and coordinators (their --kafka-version, before the user's own
flags so an explicit setting overrides what the release turns on) and the
producer (kafka.version); a release that needs one request in flight (0.11)
gets it unless the settings say otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from eoslab import kafka_version

PREFIXES = ("broker", "coordinator", "controller", "topic", "workload")


def service_flag(name: str, value: str) -> list[str]:
    """A service flag from a setting: true -> --name, false -> --no-name (the switches that a Kafka
    version turns on can be turned off again), else --name=value."""
    flag = f"--{name.replace('.', '-')}"
    if value.lower() == "true":
        return [flag]
    if value.lower() == "false":
        return [f"--no-{flag[2:]}"]
    return [f"{flag}={value}"]


@dataclass(frozen=True)
class RunSettings:
    """The split settings. The service tuples hold the user's own flags only; `broker_args()` and
    `coordinator_args()` are what the services start with."""
    kafka_version: str
    broker: tuple[str, ...] = ()
    coordinator: tuple[str, ...] = ()
    controller: tuple[str, ...] = ()
    topic: dict[str, str] = field(default_factory=dict)
    workload: dict[str, str] = field(default_factory=dict)
    consumer: dict[str, str] = field(default_factory=dict)
    producer: dict[str, str] = field(default_factory=dict)

    @classmethod
    def split(cls, settings: dict[str, str], version: str) -> "RunSettings":
        flags: dict[str, list[str]] = {"broker": [], "coordinator": [], "controller": []}
        maps: dict[str, dict[str, str]] = {"topic": {}, "workload": {}, "consumer": {},
                                           "producer": {"kafka.version": version}}
        need = kafka_version.get(version).required_max_in_flight     # 0.11: 1
        if need is not None and not any(k in settings for k in ("max.in.flight.requests.per.connection",
                                                                  "max.in.flight")):
            maps["producer"]["max.in.flight.requests.per.connection"] = str(need)
        for k, v in settings.items():
            head, _, rest = k.partition(".")
            if head in PREFIXES and rest:
                if head in maps:
                    maps[head][rest] = v
                else:
                    flags[head] += service_flag(rest, v)
            elif k == "isolation.level":
                maps["consumer"][k] = v
            else:
                maps["producer"][k] = v
        return cls(version, **{k: tuple(v) for k, v in flags.items()}, **maps)

    def _release_flag(self) -> str:
        return f"--kafka-version={self.kafka_version}"

    def broker_args(self) -> list[str]:
        return [self._release_flag(), *self.broker]

    def coordinator_args(self) -> list[str]:
        return [self._release_flag(), *self.coordinator]

    def controller_args(self) -> list[str]:
        return [self._release_flag(), *self.controller]

    def sets_services_beyond_brokers(self) -> bool:
        """Whether the user set anything of the controllers or coordinators (only the local runtime
        starts those with flags of a run's own)."""
        return bool(self.controller or self.coordinator)
