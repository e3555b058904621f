"""The services' ZooKeeper client (services.common.zk_client) reconnects at most about a second apart,
as Kafka's Java ZooKeeper client does, never with kazoo's default back-off of up to 60 s."""
import pytest
from kazoo.exceptions import ConnectionLoss
from kazoo.retry import KazooRetry

from services.common.zk_client import RECONNECT_MAX_DELAY_S, connection_retry, zk_client

pytestmark = pytest.mark.fast


def sleeps(retry: KazooRetry, failures: int) -> list[float]:
    """The waits between `failures` failed connection attempts and the one that succeeds."""
    slept = []
    retry.sleep_func = slept.append
    left = [failures]

    def attempt():
        if left[0]:
            left[0] -= 1
            raise ConnectionLoss()
    retry(attempt)
    return slept


def test_the_wait_between_connection_attempts_stays_about_a_second_however_long_the_server_is_gone():
    waits = sleeps(KazooRetry(**connection_retry()), 30)
    assert len(waits) == 30 and waits[0] <= 0.14
    assert max(waits) <= RECONNECT_MAX_DELAY_S * 1.4            # kazoo's jitter is +-40 %
    assert sum(waits[-10:]) <= 14                                # ten attempts within 14 s, not minutes


def test_kazoos_default_would_wait_far_longer():
    assert max(sleeps(KazooRetry(max_tries=-1), 30)) > 20        # why the services do not use it


def test_the_services_client_carries_that_retry_and_the_session_timeout():
    zk = zk_client("127.0.0.1:1/chroot", 1500)
    assert zk._conn_retry.max_delay == RECONNECT_MAX_DELAY_S and zk._conn_retry.max_tries == -1
    assert zk._session_timeout == 1500 and zk.chroot == "/chroot"
