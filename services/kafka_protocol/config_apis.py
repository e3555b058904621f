"""A broker's config requests: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs (Kafka's
ConfigHelper and ZkAdminManager), for topics, the broker itself and, on 4.0, KIP-848 groups.

Guarantees: DescribeConfigs of a topic lists every topic config of Kafka's table
(eoslab.common.topic_configs), or the keys asked for, with the value in force: the topic's own
(source TOPIC_CONFIG), else this broker's setting where it differs from Kafka's default
(STATIC_BROKER_CONFIG, under the broker setting's name as synonym), else Kafka's default
(DEFAULT_CONFIG); with include_synonyms, that chain. An unknown topic is UNKNOWN_TOPIC_OR_PARTITION, an
illegal name INVALID_TOPIC_EXCEPTION. Of a broker: this broker's own id lists its settings that have a
Kafka name (read-only but for Kafka's dynamic ones) and its dynamic configs in force ahead of them
(DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG); "" lists the cluster's dynamic defaults;
another broker's id is INVALID_REQUEST, as Kafka answers. AlterConfigs and
IncrementalAlterConfigs of topics go to the active controller (services/controller/topic_config_change.py),
validate_only included; of this broker's id or "" (the cluster default), to its dynamic configs
(services/broker/dynamic_config.py); duplicate keys in one resource are INVALID_REQUEST (AlterConfigs
before 3.2: the last value wins); altering an unknown topic is UNKNOWN_TOPIC_OR_PARTITION (before 2.7
UNKNOWN_SERVER_ERROR: eoslab.kafka_version has both rules). A group's configs (4.0; an older
release answers its resource type INVALID_REQUEST) are services/broker/group_configs.py's: described
and changed by IncrementalAlterConfigs (an empty group name INVALID_REQUEST). Every resource gets its
own answer; one bad resource never fails the others.
"""
from __future__ import annotations

from eoslab.common import acl
from services.kafka_protocol.auth_helper import AuthHelper
from eoslab.common import dynamic_broker_configs as dbc
from eoslab.common import topic_configs as tc
from eoslab.common.errors import E
from eoslab.common.topics import validate_topic_name
from eoslab.v1 import controller_pb2

from eoslab.common.config_ops import (BROKER, BROKER_LOGGER, DEFAULT_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, GROUP,
                                     STATIC_BROKER_CONFIG, TOPIC, TOPIC_CONFIG)

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
VERSIONS = {DESCRIBE_CONFIGS: (0, 4), ALTER_CONFIGS: (0, 2), INCREMENTAL_ALTER_CONFIGS: (0, 1)}
GRPC_ADDRESSES = ("listen", "advertise")     # the lab's gRPC addresses: Kafka's listeners are kafka.*
# the broker's LogConfig field behind each topic config it has a setting for
BROKER_DEFAULTS = {"segment.bytes": "segment_bytes", "max.message.bytes": "max_message_bytes",
                   "min.insync.replicas": "min_insync_replicas", "flush.messages": "flush_messages",
                   "flush.ms": "flush_ms"}


def register_config_apis(apis) -> None:
    """Serve the config APIs on a BrokerApis (its `s`, the KafkaServer, and `svc`, its BrokerService)."""
    handlers = ConfigApis(apis.s, apis.svc, getattr(apis, "auth", None))
    for key, fn in ((DESCRIBE_CONFIGS, handlers.describe_configs), (ALTER_CONFIGS, handlers.alter_configs),
                    (INCREMENTAL_ALTER_CONFIGS, handlers.incremental_alter_configs)):
        apis.register(key, *VERSIONS[key], fn)


def _entry(name, value, source, read_only, synonyms, config_type, include_synonyms):
    return {"name": name, "value": value, "read_only": read_only, "config_source": source,
            "is_sensitive": False, "synonyms": synonyms if include_synonyms else [], "config_type": config_type,
            "documentation": None}


class ConfigApis:
    def __init__(self, server, service, auth=None):
        self.s = server
        self.svc = service
        self.auth = auth or AuthHelper()

    def _refused(self, r, operation: int) -> tuple[int, str] | None:
        """KafkaApis: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for a broker's."""
        if r.resource_type == TOPIC and not self.auth.authorize(operation, acl.TOPIC, r.resource_name):
            return E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
        if r.resource_type in (BROKER, BROKER_LOGGER) and not self.auth.authorize_cluster(operation):
            return E.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed."
        if r.resource_type == GROUP and self._groups() is not None and \
                not self.auth.authorize(operation, acl.GROUP, r.resource_name):
            return E.GROUP_AUTHORIZATION_FAILED, "Authorization failed."
        return None

    def _groups(self):
        """The broker's group configs where the release has them (KIP-848's, Kafka 4.0), else None."""
        from eoslab import kafka_version
        if not kafka_version.get(getattr(self.s, "kafka_version", None)).group_config_operations:
            return None
        return getattr(self.s, "group_configs", None)

    def _group_name(self, name: str) -> None:
        if not name:
            raise _Refused(E.INVALID_REQUEST, "Group name must not be empty")

    # -- DescribeConfigs --------------------------------------------------------------------------
    def describe_configs(self, header, req) -> dict:
        syn = bool(getattr(req, "include_synonyms", False))
        results = []
        for r in req.resources:
            res = {"resource_type": int(r.resource_type), "resource_name": r.resource_name, "error_code": E.NONE,
                   "error_message": None, "configs": []}
            keys = list(r.configuration_keys) if r.configuration_keys else None
            try:
                if (refused := self._refused(r, acl.DESCRIBE_CONFIGS)) is not None:
                    raise _Refused(*refused)
                if r.resource_type == TOPIC:
                    res["configs"] = self._topic(r.resource_name, keys, syn)
                elif r.resource_type == BROKER:
                    res["configs"] = self._broker(r.resource_name, keys, syn)
                elif r.resource_type == BROKER_LOGGER:
                    self._own_broker_id(r.resource_name, empty_ok=False)
                elif r.resource_type == GROUP and self._groups() is not None:
                    self._group_name(r.resource_name)
                    res["configs"] = self._groups().describe(r.resource_name, keys, syn)
                else:
                    raise _Refused(E.INVALID_REQUEST, f"Unsupported resource type: {r.resource_type}")
            except _Refused as e:
                res.update(error_code=e.code, error_message=str(e), configs=[])
            if header.api_version == 0:           # v0 says whether a value is the default, not its source
                for c in res["configs"]:
                    c["is_default"] = c["config_source"] == DEFAULT_CONFIG
            results.append(res)
        return {"results": results}

    def _topic(self, topic: str, keys, syn: bool) -> list[dict]:
        if (why := validate_topic_name(topic)) is not None:
            raise _Refused(E.INVALID_TOPIC_EXCEPTION, why)
        if not self.s.metadata.has_topic(topic):
            raise _Refused(E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        own = self.s.metadata.topic_configs(topic)
        defaults = self.s.replica_manager.defaults
        out = []
        for name, key in sorted(tc.TOPIC_CONFIGS.items()):
            if keys is not None and name not in keys:
                continue
            chain = []
            if name in own:
                chain.append({"name": name, "value": own[name], "source": TOPIC_CONFIG})
            field = BROKER_DEFAULTS.get(name)
            if field is not None and str(getattr(defaults, field)) != key.default:
                chain.append({"name": key.synonym, "value": str(getattr(defaults, field)),
                              "source": STATIC_BROKER_CONFIG})
            if key.synonym:
                chain.append({"name": key.synonym, "value": key.default, "source": DEFAULT_CONFIG})
            value, source = (chain[0]["value"], chain[0]["source"]) if chain else (key.default, DEFAULT_CONFIG)
            out.append(_entry(name, value, source, False, chain, key.type, syn))
        return out

    def _own_broker_id(self, name: str, empty_ok: bool) -> bool:
        """True for this broker's id, False for "" (when allowed); else INVALID_REQUEST."""
        if name == "" and empty_ok:
            return False
        if name == "":
            raise _Refused(E.INVALID_REQUEST, "Broker id must not be empty")
        try:
            asked = int(name)
        except ValueError:
            raise _Refused(E.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
        if asked != self.s.broker_id:
            expected = f"{self.s.broker_id} or empty string" if empty_ok else f"{self.s.broker_id}"
            raise _Refused(E.INVALID_REQUEST, f"Unexpected broker id, expected {expected}, but received {name}")
        return True

    def _broker(self, name: str, keys, syn: bool) -> list[dict]:
        dyn = getattr(self.s, "dynamic_config", None)
        if not self._own_broker_id(name, empty_ok=True):      # "": the cluster's dynamic defaults
            own = dyn.entity("") if dyn is not None else {}
            return [_entry(n, None if n in dbc.SENSITIVE else v, DYNAMIC_DEFAULT_BROKER_CONFIG, False,
                           [{"name": n, "value": v, "source": DYNAMIC_DEFAULT_BROKER_CONFIG}], dbc.DYNAMIC[n], syn)
                    for n, v in sorted(own.items()) if keys is None or n in keys]
        overrides = dyn.overrides() if dyn is not None else {}
        cfg = getattr(self.s, "config", None)
        out, seen = [], set()
        for k in cfg.DEF.keys if cfg is not None else ():
            if k.kafka_name == "" or k.name in GRPC_ADDRESSES:
                continue
            kname = k.kafka_name or k.name
            if keys is not None and kname not in keys:
                continue
            value = getattr(cfg, k.dest)
            text = None if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
            source = DEFAULT_CONFIG if value == k.default else STATIC_BROKER_CONFIG
            chain = [{"name": kname, "value": text, "source": source}]
            if kname in overrides:                              # a dynamic value comes first
                text, source = overrides[kname]
                chain.insert(0, {"name": kname, "value": text, "source": source})
            seen.add(kname)
            out.append(_entry(kname, text, source, kname not in dbc.DYNAMIC, chain, _type_id(k.type), syn))
        for n, (v, source) in sorted(overrides.items()):        # dynamic configs the lab has no setting for
            if n not in seen and (keys is None or n in keys):
                out.append(_entry(n, None if n in dbc.SENSITIVE else v, source, False,
                                  [{"name": n, "value": v, "source": source}], dbc.DYNAMIC[n], syn))
        return out

    # -- AlterConfigs / IncrementalAlterConfigs -----------------------------------------------------
    def alter_configs(self, header, req) -> dict:
        return self._alter(req, incremental=False)

    def incremental_alter_configs(self, header, req) -> dict:
        return self._alter(req, incremental=True)

    def _alter(self, req, incremental: bool) -> dict:
        from eoslab import kafka_version
        release = kafka_version.get(getattr(self.s, "kafka_version", None))
        refuses_duplicates = release.alter_configs_duplicates_refused
        answers: list[dict] = []
        asked: dict[str, tuple[dict, object]] = {}        # topic -> (its answer, its resource)
        for r in req.resources:
            res = {"resource_type": int(r.resource_type), "resource_name": r.resource_name, "error_code": E.NONE,
                   "error_message": None}
            answers.append(res)
            names = [c.name for c in r.configs]
            if not incremental and not refuses_duplicates:     # before 3.2: the last value of a key wins
                r = _LastValueWins(r)
            if (refused := self._refused(r, acl.ALTER_CONFIGS)) is not None:
                res.update(error_code=refused[0], error_message=refused[1])
            elif len(set(names)) != len(names) and (incremental or refuses_duplicates):
                res.update(error_code=E.INVALID_REQUEST, error_message="Error due to duplicate config keys")
            elif r.resource_type == GROUP and incremental and self._groups() is not None:
                if not r.resource_name:
                    res.update(error_code=E.INVALID_REQUEST, error_message="Group name must not be empty")
                else:
                    err, msg = self._groups().alter(r.resource_name, [
                        (c.name, int(getattr(c, "config_operation", 0)), c.value) for c in r.configs],
                        bool(req.validate_only))
                    res.update(error_code=err, error_message=msg)
            elif r.resource_type == BROKER:
                try:
                    self._own_broker_id(r.resource_name, empty_ok=True)
                    dyn = getattr(self.s, "dynamic_config", None)
                    if dyn is None:
                        raise _Refused(E.INVALID_REQUEST, "this broker takes no dynamic configs")
                    err, msg = dyn.alter(r.resource_name, [
                        (c.name, int(getattr(c, "config_operation", 0)) if incremental else 0, c.value)
                        for c in r.configs], incremental, bool(req.validate_only))
                except _Refused as e:
                    err, msg = e.code, str(e)
                res.update(error_code=err, error_message=msg)
            elif r.resource_type != TOPIC:
                res.update(error_code=E.INVALID_REQUEST, error_message="AlterConfigs is only supported for topics "
                           f"and brokers, but resource type is {r.resource_type}")
            elif (why := validate_topic_name(r.resource_name)) is not None:
                res.update(error_code=E.INVALID_TOPIC_EXCEPTION, error_message=why)
            elif r.resource_name in asked:
                for one in (res, asked[r.resource_name][0]):
                    one.update(error_code=E.INVALID_REQUEST, error_message="Error due to duplicate resources")
            else:
                asked[r.resource_name] = (res, r)
        change = controller_pb2.AlterTopicConfigsRequest(validate_only=bool(req.validate_only))
        for topic, (res, r) in asked.items():
            if res["error_code"] != E.NONE:
                continue
            t = change.topics.add(topic=topic, replace=not incremental)
            for c in r.configs:
                op = int(getattr(c, "config_operation", 0)) if incremental else 0
                t.ops.add(name=c.name, op=op, value=c.value or "", has_value=c.value is not None)
        if change.topics:
            for out in self.svc.alter_topic_configs(change).results:
                err, msg = out.error, out.error_message or None
                if err == E.UNKNOWN_TOPIC_OR_PARTITION and release.alter_configs_unknown_topic == "UNKNOWN_SERVER_ERROR":
                    err, msg = E.UNKNOWN_SERVER_ERROR, f'Topic "{out.topic}" does not exist.'   # before 2.7
                asked[out.topic][0].update(error_code=err, error_message=msg)
        return {"responses": answers}


class _LastValueWins:
    """A resource of AlterConfigs as Kafka before 3.2 read it: each key once, with its last value."""

    def __init__(self, r):
        self._r = r
        self.configs = list({c.name: c for c in r.configs}.values())

    def __getattr__(self, name):
        return getattr(self._r, name)


class _Refused(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def _type_id(t) -> int:
    return {bool: tc.BOOLEAN, int: tc.LONG, str: tc.STRING, float: tc.DOUBLE}.get(t, 0)
