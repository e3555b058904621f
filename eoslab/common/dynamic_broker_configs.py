"""Kafka's dynamic broker configs (DynamicBrokerConfig.AllDynamicConfigs): every setting a broker takes
through AlterConfigs / IncrementalAlterConfigs without a restart, with its type and scope.

Guarantees:
- `DYNAMIC` holds exactly Kafka's set: the SSL reconfigurables, the log cleaner's, the log defaults
  (the first broker synonym of every topic config but message.format.version), the thread pools',
  metric.reporters, the listeners' (with their SSL and SASL settings), the socket server's, the
  producer-state ones and the remote log's; each with Kafka's config type (TOPIC_CONFIGS' for the
  log defaults, with their bounds and choices);
- `PER_BROKER` are those Kafka takes only per broker (the SSL and listener ones but max.connections,
  max.connection.creation.rate and num.network.threads): at the cluster default (`""`) they are
  refused;
- `check(name, value)` is None for a value Kafka would parse, else one line saying why.
"""
from __future__ import annotations

from eoslab.common import topic_configs as tc

BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9

_SSL = {"ssl.keystore.type": STRING, "ssl.keystore.location": STRING, "ssl.keystore.password": PASSWORD,
        "ssl.key.password": PASSWORD, "ssl.truststore.type": STRING, "ssl.truststore.location": STRING,
        "ssl.truststore.password": PASSWORD, "ssl.keystore.certificate.chain": PASSWORD,
        "ssl.keystore.key": PASSWORD, "ssl.truststore.certificates": PASSWORD}
_CLEANER = {"log.cleaner.threads": INT, "log.cleaner.dedupe.buffer.size": LONG,
            "log.cleaner.io.buffer.load.factor": DOUBLE, "log.cleaner.io.buffer.size": INT,
            "message.max.bytes": INT, "log.cleaner.io.max.bytes.per.second": DOUBLE, "log.cleaner.backoff.ms": LONG}
_THREADS = {"num.io.threads": INT, "num.replica.fetchers": INT, "num.recovery.threads.per.data.dir": INT,
            "background.threads": INT}
_LISTENER = {"advertised.listeners": STRING, "listeners": STRING, "listener.security.protocol.map": STRING,
             "principal.builder.class": CLASS, "ssl.protocol": STRING, "ssl.provider": STRING,
             "ssl.cipher.suites": LIST, "ssl.enabled.protocols": LIST, "ssl.keymanager.algorithm": STRING,
             "ssl.trustmanager.algorithm": STRING, "ssl.endpoint.identification.algorithm": STRING,
             "ssl.secure.random.implementation": STRING, "ssl.client.auth": STRING,
             "ssl.engine.factory.class": CLASS, "sasl.mechanism.inter.broker.protocol": STRING,
             "sasl.jaas.config": PASSWORD, "sasl.enabled.mechanisms": LIST, "sasl.kerberos.service.name": STRING,
             "sasl.kerberos.kinit.cmd": STRING, "sasl.kerberos.ticket.renew.window.factor": DOUBLE,
             "sasl.kerberos.ticket.renew.jitter": DOUBLE, "sasl.kerberos.min.time.before.relogin": LONG,
             "sasl.kerberos.principal.to.local.rules": LIST, "sasl.login.refresh.window.factor": DOUBLE,
             "sasl.login.refresh.window.jitter": DOUBLE, "sasl.login.refresh.min.period.seconds": SHORT,
             "sasl.login.refresh.buffer.seconds": SHORT, "max.connections": INT,
             "max.connection.creation.rate": INT, "num.network.threads": INT,
             **{k: v for k, v in _SSL.items()}}
_SOCKET = {"max.connections.per.ip": INT, "max.connections.per.ip.overrides": STRING, "max.connections": INT,
           "max.connection.creation.rate": INT}
_PRODUCER_STATE = {"producer.id.expiration.ms": INT, "transaction.partition.verification.enable": BOOLEAN}
_REMOTE = {"remote.log.index.file.cache.total.size.bytes": LONG, "remote.fetch.max.wait.ms": INT,
           "remote.log.manager.copy.max.bytes.per.second": LONG,
           "remote.log.manager.fetch.max.bytes.per.second": LONG, "remote.list.offsets.request.timeout.ms": LONG}
# the log defaults: a topic config's broker synonym, typed as the topic config
LOG_DEFAULTS = {k.synonym: k for k in tc.TOPIC_CONFIGS.values()
                if k.synonym and k.name != "message.format.version"}
_TOPIC_TYPES = {tc.BOOLEAN: BOOLEAN, tc.STRING: STRING, tc.INT: INT, tc.LONG: LONG, tc.DOUBLE: DOUBLE,
                tc.LIST: LIST}

DYNAMIC: dict[str, int] = {**_SSL, **_CLEANER, **{n: _TOPIC_TYPES[k.type] for n, k in LOG_DEFAULTS.items()},
                           **_THREADS, "metric.reporters": LIST, **_LISTENER, **_SOCKET, **_PRODUCER_STATE,
                           **_REMOTE}
CLUSTER_LEVEL_LISTENER = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
PER_BROKER = frozenset((set(_SSL) | set(_LISTENER)) - CLUSTER_LEVEL_LISTENER)
SENSITIVE = frozenset(n for n, t in DYNAMIC.items() if t == PASSWORD)


def check(name: str, value: str) -> str | None:
    """Why Kafka would not take `value` for the dynamic config `name` (None: it would)."""
    if name in LOG_DEFAULTS:
        why = tc.check(LOG_DEFAULTS[name].name, value)
        return None if why is None else why.replace(LOG_DEFAULTS[name].name, name, 1)
    kind = DYNAMIC[name]
    v = value.strip()
    try:
        if kind == BOOLEAN and v.lower() not in ("true", "false"):
            raise ValueError("Expected value to be either true or false")
        if kind in (INT, SHORT, LONG):
            n = int(v)
            bits = {INT: 31, SHORT: 15, LONG: 63}[kind]
            if not -2 ** bits <= n < 2 ** bits:
                raise ValueError("Not a number of type " + {INT: "INT", SHORT: "SHORT", LONG: "LONG"}[kind])
        if kind == DOUBLE:
            float(v)
    except ValueError as e:
        reason = str(e) if "type" in str(e) or "either" in str(e) else \
            f"Not a number of type {({INT: 'INT', SHORT: 'SHORT', LONG: 'LONG', DOUBLE: 'DOUBLE'}).get(kind)}"
        return f"Invalid value {value} for configuration {name}: {reason}"
    return None
