"""The broker's half of KIP-966: the high watermark stays while the ISR is under min.insync.replicas
(3.9+, so a replica that left the ISR holds everything below it), and the log dir's clean-shutdown
marker that tells the controller whether this broker may have lost its unflushed tail."""
import os

import pytest

from eoslab.common import record_batch as rb
from eoslab.common.errors import E
from eoslab.common.time import MockTime
from services.broker.checkpoints import consume_broker_clean_shutdown, write_broker_clean_shutdown
from services.broker.log_config import LogConfig
from services.broker.partition import Partition

pytestmark = pytest.mark.fast


def leader(tmp_path, hw_needs_min_isr: bool) -> Partition:
    p = Partition("t", 0, str(tmp_path), broker_id=1, time=MockTime(),
                  config=LogConfig(min_insync_replicas=2, hw_needs_min_isr=hw_needs_min_isr))
    p.make_leader(0, [1, 2, 3], [1, 2, 3], 0)
    return p


def append(p):
    assert p.append_records_to_leader(rb.build_batch([(None, b"x", 0)]), acks=1).error == E.NONE


@pytest.mark.parametrize("strict,hw_after", [(True, 1), (False, 2)])
def test_the_high_watermark_does_not_move_while_the_isr_is_under_min_insync_replicas(tmp_path, strict, hw_after):
    p = leader(tmp_path, strict)
    try:
        append(p)
        p.record_follower_fetch(2, 1)
        p.record_follower_fetch(3, 1)
        assert p.high_watermark == 1
        p.update_isr([1], 1)                     # 2 and 3 left the ISR
        append(p)                                # an acks=1 write: only the leader has it
        assert p.high_watermark == hw_after      # 3.9+: not past what 2 and 3 hold; before: the leader's end
        if strict:
            p.update_isr([1, 2], 2)              # back at min.insync.replicas: the rule lets it move again
            p.record_follower_fetch(2, 2)
            assert p.high_watermark == 2
    finally:
        p.close()


def test_a_broker_data_dir_is_clean_only_after_a_clean_shutdown_and_the_marker_is_used_once(tmp_path):
    d = str(tmp_path)
    assert consume_broker_clean_shutdown(os.path.join(d, "absent"))   # no data dir yet: a new broker
    assert consume_broker_clean_shutdown(d)                  # a new, empty data dir: nothing to lose
    os.mkdir(os.path.join(d, "t-0"))
    assert not consume_broker_clean_shutdown(d)              # logs and no marker: the process died
    write_broker_clean_shutdown(d)
    assert consume_broker_clean_shutdown(d)                  # a clean stop, once
    assert not consume_broker_clean_shutdown(d)              # the next start without a stop is unclean
