import pytest

from clients.producer.config import ProducerConfig

pytestmark = pytest.mark.fast


def test_kafka_property_names():
    c = ProducerConfig.from_props({"acks": "all", "enable.idempotence": "true",
                                   "max.in.flight.requests.per.connection": "7", "on.out.of.order": "bump-epoch"})
    assert (c.acks, c.enable_idempotence, c.max_in_flight, c.on_out_of_order) == (-1, True, 7, "bump-epoch")


@pytest.mark.parametrize("props,msg", [
    ({"acks": "2"}, "acks"),
    ({"bogus.setting": "1"}, "unknown producer setting"),
    ({"max.in.flight.requests.per.connection": "0"}, "at least 1"),
    ({"acks": "1", "enable.idempotence": "true"}, "needs acks=all"),
    ({"enable.idempotence": "maybe"}, "true or false"),
])
def test_bad_settings_are_refused_with_a_clear_message(props, msg):
    with pytest.raises(ValueError, match=msg):
        ProducerConfig.from_props(props)


# -- resolution by Kafka release (ProducerConfig.postProcessAndValidateIdempotenceConfigs) ----------------
@pytest.mark.parametrize("version,idempotent,acks,oos", [
    ("0.11", False, 1, "fatal"), ("2.5", False, 1, "bump-epoch"), ("3.0", True, -1, "bump-epoch"),
    ("4.0", True, -1, "bump-epoch"),
])
def test_defaults_come_from_the_release(version, idempotent, acks, oos):
    c = ProducerConfig.from_props({}, kafka_version=version)
    assert (c.enable_idempotence, c.acks, c.on_out_of_order, c.kafka_version) == (idempotent, acks, oos, version)


def test_kafka_version_property_and_user_settings_override_the_release():
    c = ProducerConfig.from_props({"kafka.version": "0.11", "enable.idempotence": "true", "max.in.flight": "1"})
    assert (c.kafka_version, c.enable_idempotence, c.acks) == ("0.11", True, -1)   # acks follows idempotence
    assert ProducerConfig.from_props({"on.out.of.order": "fatal"}, kafka_version="4.0").on_out_of_order == "fatal"
    with pytest.raises(ValueError, match="unknown Kafka version"):
        ProducerConfig.from_props({}, kafka_version="9.9")


@pytest.mark.parametrize("version", ["3.0", "3.6", "4.0"])
def test_implicit_idempotence_yields_to_acks_1_with_a_warning(version, caplog):
    c = ProducerConfig.from_props({"acks": "1"}, kafka_version=version)
    assert (c.enable_idempotence, c.acks) == (False, 1)
    assert "idempotence disabled because of acks=1" in caplog.text


def test_implicit_idempotence_yields_to_six_in_flight():
    c = ProducerConfig.from_props({"max.in.flight.requests.per.connection": "6"}, kafka_version="4.0")
    assert c.enable_idempotence is False and c.idempotence_disabled == "max.in.flight.requests.per.connection=6"


@pytest.mark.parametrize("props,version,msg", [
    ({"acks": "1", "enable.idempotence": "true"}, "4.0", "^enable.idempotence=true needs acks=all, got acks=1"),
    ({"max.in.flight": "6", "enable.idempotence": "true"}, "3.0", "at most 5, got max.in.flight"),
    ({"retries": "0", "enable.idempotence": "true"}, "4.0", "needs retries above 0"),
    ({"acks": "1", "transactional.id": "t"}, "2.5", "transactional.id implies idempotence"),
    ({"acks": "1", "transactional.id": "t"}, "4.0", "transactional.id needs enable.idempotence.*acks=1"),
    ({"max.in.flight": "2", "enable.idempotence": "true"}, "0.11", "at most 1"),
])
def test_conflicts_that_are_errors(props, version, msg):
    with pytest.raises(ValueError, match=msg) as e:
        ProducerConfig.from_props(props, kafka_version=version)
    assert "\n" not in str(e.value)


def test_before_3_0_idempotence_is_off_by_default_so_acks_1_is_no_conflict():
    c = ProducerConfig.from_props({"acks": "1"}, kafka_version="2.5")
    assert (c.enable_idempotence, c.acks, c.idempotence_disabled) == (False, 1, "")


def test_lab_window_study_keeps_idempotence_past_the_in_flight_limit():
    """on.out.of.order set explicitly asks for the idempotent producer at the window's edge (module doc)."""
    c = ProducerConfig(max_in_flight=6, on_out_of_order="bump-epoch")
    assert c.enable_idempotence is True and c.max_in_flight == 6
    assert ProducerConfig.from_props({"max.in.flight": "6", "on.out.of.order": "fatal"},
                                     kafka_version="0.11").enable_idempotence is False   # 0.11: off by default
