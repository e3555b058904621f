"""ClusterMetadata.wait_for_cluster: keeps trying while no address answers, for as long as it is told
(seconds of the metadata's clock: a MockTime here, moved by the back-off's sleeps, never real time)."""
import pytest

from eoslab.common.errors import E, KafkaError
from eoslab.common.time import MockTime
from clients.metadata import ClusterMetadata

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("timeout_s, tries", [(0.0, [0.0]), (1.0, [0.0, 0.1, 0.3, 0.7])])
def test_nobody_answers_until_the_timeout_then_one_error(timeout_s, tries):
    clock = MockTime()
    md = ClusterMetadata("127.0.0.1:1", time=clock)      # a port of this machine that nothing listens on
    start, attempts = clock.monotonic(), []
    refresh = md.refresh

    def counted(topics=None):
        attempts.append(clock.monotonic() - start)
        return refresh(topics)
    md.refresh = counted
    try:
        with pytest.raises(KafkaError) as e:
            md.wait_for_cluster(timeout_s)
    finally:
        md.close()
    assert e.value.code == E.NETWORK_EXCEPTION and "cannot reach the cluster" in str(e.value)
    assert attempts == pytest.approx(tries)         # it kept trying, backing off 0.1 s doubling
    assert clock.monotonic() - start <= timeout_s   # and stopped when the next try would pass the timeout
