"""eoslab.common.rpc.ChannelCache: one channel and one stub per address, forgotten with the channel."""
import pytest

from eoslab.v1 import broker_pb2_grpc, txn_pb2_grpc
from eoslab.common.rpc import ChannelCache

pytestmark = pytest.mark.fast


def test_stub_is_built_once_per_address_and_service():
    cache = ChannelCache()
    try:
        a = cache.stub("127.0.0.1:1", broker_pb2_grpc.BrokerStub)
        assert cache.stub("127.0.0.1:1", broker_pb2_grpc.BrokerStub) is a
        assert cache.stub("127.0.0.1:2", broker_pb2_grpc.BrokerStub) is not a
        t = cache.stub("127.0.0.1:1", txn_pb2_grpc.TransactionCoordinatorStub)
        assert isinstance(t, txn_pb2_grpc.TransactionCoordinatorStub)
    finally:
        cache.close_all()


def test_a_dropped_channel_takes_its_stubs_with_it():
    cache = ChannelCache()
    try:
        a = cache.stub("127.0.0.1:1", broker_pb2_grpc.BrokerStub)
        ch = cache.get("127.0.0.1:1")
        cache.drop("127.0.0.1:1")
        b = cache.stub("127.0.0.1:1", broker_pb2_grpc.BrokerStub)
        assert b is not a
        assert cache.get("127.0.0.1:1") is not ch      # a new channel, and b is on it
        cache.close_all()
        assert cache.stub("127.0.0.1:1", broker_pb2_grpc.BrokerStub) is not b
    finally:
        cache.close_all()
