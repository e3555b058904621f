"""ClusterMetadata.wait_for_cluster: keeps trying while no address answers, for as long as it is told."""
import time

import pytest

from eoslab.common.errors import E, KafkaError
from clients.metadata import ClusterMetadata

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("timeout_s", [0.0, 1.0])
def test_nobody_answers_until_the_timeout_then_one_error(timeout_s):
    md = ClusterMetadata("127.0.0.1:1")      # a port of this machine that nothing listens on
    try:
        t0 = time.monotonic()
        with pytest.raises(KafkaError) as e:
            md.wait_for_cluster(timeout_s)
        took = time.monotonic() - t0
    finally:
        md.close()
    assert e.value.code == E.NETWORK_EXCEPTION and "cannot reach the cluster" in str(e.value)
    assert took >= timeout_s * 0.7             # it kept trying
    assert took < timeout_s + 3.0              # and stopped when told
