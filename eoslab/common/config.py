"""Typed service settings, as Kafka's `ConfigDef` declares them: one place per service.

Guarantees: a `ConfigDef` lists each setting once (Kafka's name where Kafka has
one, type, default, range or choices, doc); the service's command-line flags,
the `EOSLAB_<NAME>` environment variables that Docker and Kubernetes set, the
validation of `eoslab run --set role.x=y`, and docs/configuration.md all come
from it. `ConfigDef.parse(flags, env)` checks everything in-process and raises
`ConfigError` with one line naming the flag and what is wrong; nothing is
started to validate a flag. A setting's flag is its name with dots as dashes
(`replica.lag.time.max.ms` -> `--replica-lag-time-max-ms`); where the lab's
flag differs from Kafka's name, `flag` says so and Kafka's name is kept as
`kafka_name` for the docs. Settings with the default `BY_VERSION` are filled
from the `--kafka-version` release's behaviour (eoslab.kafka_version) unless
given.
"""
from __future__ import annotations

import argparse
import difflib
import os
from dataclasses import dataclass, field
from typing import Any, Callable


class ConfigError(ValueError):
    """A bad setting: one line, naming the flag."""


class _ByVersion:
    def __repr__(self) -> str:
        return "by version"


BY_VERSION = _ByVersion()     # the default comes from the --kafka-version release
REQUIRED = object()           # a process setting every start must give (id, addresses)


@dataclass(frozen=True)
class ConfigKey:
    name: str                                  # the lab's setting name, dotted
    type: Callable[[str], Any]                 # int, str, bool
    default: Any
    doc: str
    min: int | None = None
    max: int | None = None
    choices: tuple[str, ...] | None = None
    kafka_name: str | None = None              # Kafka's name where it differs ("" when Kafka has none)
    process: bool = False                      # identity or address of one process, not a behaviour

    @property
    def flag(self) -> str:
        return "--" + self.name.replace(".", "-")

    @property
    def dest(self) -> str:
        return self.name.replace(".", "_").replace("-", "_")

    @property
    def env(self) -> str:
        return "EOSLAB_" + self.dest.upper()

    def convert(self, raw: Any) -> Any:
        if self.type is bool:
            if isinstance(raw, bool):
                return raw
            low = str(raw).strip().lower()
            if low in ("true", "1", "yes"):
                return True
            if low in ("false", "0", "no"):
                return False
            raise ConfigError(f"{self.flag}: {raw!r} is not true or false")
        try:
            v = self.type(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"{self.flag}: {raw!r} is not {'an integer' if self.type is int else 'valid'}") \
                from None
        self.check(v)
        return v

    def text(self, v: Any) -> str:
        """A checked value as a flag or an environment variable writes it (bools as true/false)."""
        return ("true" if v else "false") if self.type is bool else str(v)

    def as_flags(self, value: Any, text: str | None = None) -> list[str]:
        """The command-line words that give this setting `value`, converted and checked first (ConfigError
        otherwise). A bool is the bare flag or its `--no-` form; `text`, when given, is written in the value's
        place (a deploy file's `${VAR:-default}` or shell expression that becomes `value` at start)."""
        v = self.convert(value)
        if self.type is bool and text is None:
            return [self.flag] if v else ["--no-" + self.flag[2:]]
        return [self.flag, self.text(v) if text is None else text]

    def as_env(self, value: Any, text: str | None = None) -> tuple[str, str]:
        """(`EOSLAB_<NAME>`, value) that give this setting `value`, checked as `as_flags` checks it."""
        v = self.convert(value)
        return self.env, self.text(v) if text is None else text

    def check(self, v: Any) -> None:
        if self.choices is not None and v not in self.choices:
            raise ConfigError(f"{self.flag}: {v!r} is not one of {', '.join(self.choices)}")
        if self.min is not None and v < self.min:
            raise ConfigError(f"{self.flag} must be at least {self.min} (got {v})")
        if self.max is not None and v > self.max:
            raise ConfigError(f"{self.flag} must be at most {self.max} (got {v})")


class _Parser(argparse.ArgumentParser):
    def error(self, message):     # one line, raised: the caller decides whether to exit
        raise ConfigError(message)


@dataclass
class ConfigDef:
    role: str
    keys: list[ConfigKey] = field(default_factory=list)

    def define(self, name: str, type, default, doc: str, **kw) -> "ConfigDef":
        if any(k.name == name for k in self.keys):
            raise ValueError(f"{self.role}: {name} defined twice")
        self.keys.append(ConfigKey(name, type, default, doc, **kw))
        return self

    def define_process(self, id_name: str, who: str, users: str) -> "ConfigDef":
        """What every service process has: its id, its address, who reaches it where, its ZooKeeper."""
        return (self.define(id_name, int, REQUIRED, f"this {who}'s id", min=0, process=True)
                .define("listen", str, REQUIRED, "HOST:PORT the gRPC server binds", kafka_name="listeners",
                        process=True)
                .define("advertise", str, None, f"HOST:PORT {users} use (default: listen)",
                        kafka_name="advertised.listeners", process=True)
                .define("zookeeper", str, REQUIRED, "HOST:PORT[/chroot]", kafka_name="zookeeper.connect",
                        process=True))

    def define_zk_session(self) -> "ConfigDef":
        return self.define("zk.session.timeout.ms", int, 2000, "ZooKeeper session timeout (Kafka: 18000)", min=1,
                           kafka_name="zookeeper.session.timeout.ms")

    def key(self, name: str) -> ConfigKey:
        for k in self.keys:
            if k.name == name or k.flag == "--" + name.replace(".", "-") or k.dest == name:
                return k
        raise KeyError(name)

    def setting(self, name: str) -> ConfigKey:
        """The setting called exactly `name` (dotted, as declared); ConfigError naming the role otherwise."""
        for k in self.keys:
            if k.name == name:
                return k
        close = difflib.get_close_matches(name, [k.name for k in self.keys], n=1)
        raise ConfigError(f"the {self.role} has no setting {name!r}" + (f" (did you mean {close[0]!r}?)" if close
                                                                          else ""))

    def parser(self, prog: str) -> argparse.ArgumentParser:
        p = _Parser(prog=prog)
        for k in self.keys:
            if k.type is bool:          # --x, --x=true|false, --no-x
                p.add_argument(k.flag, dest=k.dest, nargs="?", const="true", default=None, help=k.doc)
                p.add_argument("--no-" + k.flag[2:], dest=k.dest, action="store_const", const="false",
                               help=argparse.SUPPRESS)
            else:
                p.add_argument(k.flag, dest=k.dest, default=None, help=k.doc)
        return p

    def parse(self, argv: list[str], env: dict[str, str] | None = None, prog: str | None = None) -> dict[str, Any]:
        """Flags, then `EOSLAB_<NAME>` variables, then defaults; every value converted and checked.
        Values still `BY_VERSION` are left for the caller to fill from the release."""
        env = os.environ if env is None else env
        ns = self.parser(prog or f"python -m services.{self.role}").parse_args(list(argv))
        out: dict[str, Any] = {}
        for k in self.keys:
            raw = getattr(ns, k.dest)
            if raw is None and k.env in env and env[k.env] != "":
                raw = env[k.env]
            if raw is None:
                if k.default is REQUIRED:
                    raise ConfigError(f"{k.flag} is required")
                out[k.dest] = k.default
            else:
                out[k.dest] = k.convert(raw)
        return out

    def check_flags(self, flags: list[str]) -> dict[str, Any]:
        """`eoslab run --set` and `--broker-arg`: behaviour flags only, checked in-process; the
        settings they give (every other one at its default)."""
        process = {k.flag for k in self.keys if k.process}
        for f in flags:
            name = f.split("=", 1)[0]
            if name in process:
                raise ConfigError(f"{name} is set by the runtime, not by hand")
        values = [(k.flag, "0" if k.type is int else "x") for k in self.keys if k.default is REQUIRED]
        return self.parse([f"{a}={b}" for a, b in values] + list(flags), env={})

    def markdown(self) -> str:
        rows = [f"### {self.role}", "",
                "| setting | flag / environment | type | default | range | Kafka | what it does |",
                "|---|---|---|---|---|---|---|"]
        for k in self.keys:
            default = "required" if k.default is REQUIRED else ("by `--kafka-version`" if k.default is BY_VERSION
                                                                else f"`{k.default}`" if k.default is not None
                                                                else "unset")
            rng = (", ".join(k.choices) if k.choices else
                   " ".join(x for x in (f">= {k.min}" if k.min is not None else "",
                                        f"<= {k.max}" if k.max is not None else "") if x) or "")
            kafka = "—" if k.kafka_name == "" else f"`{k.kafka_name or k.name}`"
            rows.append(f"| `{k.name}` | `{k.flag}` / `{k.env}` | {k.type.__name__} | {default} | {rng} | "
                        f"{kafka} | {k.doc} |")
        return "\n".join(rows) + "\n"


class ServiceConfig:
    """A service's settings as typed attributes (Kafka's `KafkaConfig`): `DEF` declares them; `parse`
    reads flags and environment; `resolve` fills the `BY_VERSION` ones from the release."""

    DEF: ConfigDef

    def __init__(self, **values: Any):
        for k in self.DEF.keys:
            setattr(self, k.dest, values.get(k.dest, k.default))

    @classmethod
    def parse(cls, argv: list[str], env: dict[str, str] | None = None):
        cfg = cls(**cls.DEF.parse(argv, env))
        cfg.resolve()
        return cfg

    def resolve(self) -> None:
        from eoslab import kafka_version
        v = kafka_version.get(getattr(self, "kafka_version", kafka_version.DEFAULT))
        for k in self.DEF.keys:
            if getattr(self, k.dest) is BY_VERSION:
                setattr(self, k.dest, getattr(v, k.dest))

    def as_dict(self) -> dict[str, Any]:
        return {k.dest: getattr(self, k.dest) for k in self.DEF.keys}


def kafka_version_key() -> dict:
    """The `kafka.version` setting every service has (its default: $EOSLAB_KAFKA_VERSION, else the lab's)."""
    from eoslab import kafka_version
    return dict(name="kafka.version", type=str, default=kafka_version.DEFAULT, choices=tuple(kafka_version.names()),
                kafka_name="", doc="behave as this Kafka release; the switches marked 'by --kafka-version' "
                                   "override it")
