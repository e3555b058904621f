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
