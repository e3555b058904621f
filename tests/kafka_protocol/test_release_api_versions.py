"""Each emulated release advertises the request versions that release served (read from Kafka's own
schemas at its tag), not the lab's newest: ApiHandlers.limit_to_release on the real handler table."""
import pytest

from eoslab import kafka_version
from services.kafka_protocol.apis import ApiHandlers

pytestmark = pytest.mark.fast
LAB = {0: (0, 12), 1: (0, 12), 2: (0, 7), 3: (0, 12), 10: (0, 4), 22: (0, 5), 23: (2, 4), 26: (0, 5), 37: (0, 3), 61: (0, 0),
       66: (0, 1)}


def served(release):
    h = ApiHandlers()
    for key, (lo, hi) in LAB.items():
        h.register(key, lo, hi, None)
    h.limit_to_release(release)
    return h.served


def test_0_11_serves_its_own_versions_and_not_what_came_later():
    s = served("0.11")
    assert s[0] == (0, 3) and s[1] == (0, 5) and s[2] == (0, 2) and s[3] == (0, 4) and s[10] == (0, 1) and s[18] == (0, 1)
    assert s[22] == (0, 0) and s[26] == (0, 0)
    assert 37 not in s            # CreatePartitions came in 1.0
    assert 23 not in s            # OffsetForLeaderEpoch v0 only, below the lab's v2
    assert s[61] == LAB[61] and s[66] == LAB[66]      # the hanging toolkit's APIs on every release


def test_later_releases_cap_at_their_tags_and_4_0_is_the_lab_s_own():
    assert served("2.5")[0] == (0, 8) and served("2.5")[3] == (0, 9) and served("2.5")[37] == (0, 2)
    assert served("3.0")[3] == (0, 11) and served("3.6")[1] == (0, 12)      # the lab's Fetch tops at 12
    # KIP-896: 4.0 no longer serves Produce v0-v2, Fetch v0-v3 (message formats v0/v1) or ListOffsets v0
    assert served("4.0") == {**LAB, 0: (3, 12), 1: (4, 12), 2: (1, 7), 18: (0, 4)}
    assert served("3.6")[0] == (0, 9) and served("3.6")[26] == (0, 3)   # no Produce v12 / EndTxn v5 before 4.0


def api_versions(release, version):
    h = ApiHandlers()
    h.limit_to_release(release)
    from types import SimpleNamespace
    return h.api_versions(SimpleNamespace(api_version=version), None)


def test_4_0_finalizes_transaction_version_2_and_older_releases_report_no_features():
    v4 = api_versions("4.0", 4)
    assert {f["name"]: f["max_version_level"] for f in v4["finalized_features"]} == \
        {"transaction.version": 2, "group.version": 1}
    assert {f["name"]: (f["min_version"], f["max_version"]) for f in v4["supported_features"]} == \
        {"transaction.version": (0, 2), "group.version": (0, 1)}
    assert v4["finalized_features_epoch"] >= 0
    # KAFKA-17011: up to v3 a supported feature whose lowest version is 0 is left out; finalized ones stay
    v3 = api_versions("4.0", 3)
    assert v3["supported_features"] == [] and len(v3["finalized_features"]) == 2
    assert "finalized_features" not in api_versions("4.0", 2)
    for old in ("0.11", "2.5", "3.0", "3.6"):
        assert "finalized_features" not in api_versions(old, 3), old


def test_the_table_was_read_from_kafka_s_schemas_for_every_older_release():
    for name in kafka_version.names():
        caps = kafka_version.request_versions(name)
        if name == kafka_version.DEFAULT:
            assert caps is None
            continue
        assert caps[18][1] >= 1 and caps[0][1] >= 3          # ApiVersions v1+, Produce v3+ (0.11's KIP-98)
    assert kafka_version.request_versions("3.6")[66] == (0, 0)    # ListTransactions came in 3.0
    assert 66 not in kafka_version.request_versions("2.5")


def test_the_consumer_group_protocol_is_served_on_4_0_only():
    """KIP-848's ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) on 4.0; 3.6 had ConsumerGroupHeartbeat
    v0 and OffsetCommit v9 only as unstable versions, which a broker does not advertise."""
    from services.kafka_protocol.consumer_group_apis import register_consumer_group_apis
    from services.kafka_protocol.group_apis import VERSIONS as CLASSIC
    from types import SimpleNamespace

    def release(name):
        h = ApiHandlers()
        h.s = SimpleNamespace(group_coordinator=None)
        for key, (lo, hi) in CLASSIC.items():
            h.register(key, lo, hi, None)
        register_consumer_group_apis(h, name)
        h.limit_to_release(name)
        return h.served
    assert release("4.0")[68] == (0, 1) and release("4.0")[69] == (0, 0) and release("4.0")[8] == (2, 9)
    for older in ("3.6", "3.0", "2.5", "0.11"):
        assert 68 not in release(older) and 69 not in release(older)
    assert release("3.6")[8] == (0, 8)         # from v0: OffsetCommit v0-v1 came back with the older releases
    assert [v for v in kafka_version.names() if kafka_version.get(v).consumer_group_protocol] == ["4.0"]
