"""What an app instance is given and what it must do: the environment, the input values.

Guarantees: `environment(...)` is the complete set of EOSLAB_* variables an
instance sees (docs/apps.md documents each); `transactional_id(group, i)` is
the same for every incarnation of instance i, so a restart or a zombie's
replacement fences the old one when the app uses it; `input_record(i, keys,
partitions)` is a pure function: record i has key "k<K>" (K = i mod keys),
value "k<K>:<i>" and input partition K mod partitions, so a key's records
keep their order in one input partition and every value is unique.
"""
from __future__ import annotations

ENV_VARS = ("EOSLAB_BOOTSTRAP", "EOSLAB_INPUT_TOPIC", "EOSLAB_OUTPUT_TOPIC", "EOSLAB_GROUP_ID",
            "EOSLAB_TRANSACTIONAL_ID", "EOSLAB_INSTANCE", "EOSLAB_INSTANCES", "EOSLAB_RUN_ID")


def transactional_id(group: str, instance: int) -> str:
    return f"{group}-{instance}"


def environment(*, bootstrap: str, input_topic: str, output_topic: str, group: str, instance: int,
                instances: int, run_id: str) -> dict[str, str]:
    return {"EOSLAB_BOOTSTRAP": bootstrap, "EOSLAB_INPUT_TOPIC": input_topic,
            "EOSLAB_OUTPUT_TOPIC": output_topic, "EOSLAB_GROUP_ID": group,
            "EOSLAB_TRANSACTIONAL_ID": transactional_id(group, instance), "EOSLAB_INSTANCE": str(instance),
            "EOSLAB_INSTANCES": str(instances), "EOSLAB_RUN_ID": run_id}


def input_record(i: int, keys: int, partitions: int) -> tuple[int, bytes, bytes]:
    """(input partition, key, value) of input record i."""
    k = i % keys
    return k % partitions, f"k{k}".encode(), f"k{k}:{i}".encode()
