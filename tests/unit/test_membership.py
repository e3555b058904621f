"""GroupMembership's offset-commit rules in one process (Kafka's GroupCoordinator.validateOffsetCommit)."""
import pytest

from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.broker import membership as ms

pytestmark = pytest.mark.fast


def joined_group(g="g"):
    m = ms.GroupMembership(initial_rebalance_delay_s=0.0)
    r = m.join(broker_pb2.JoinGroupRequest(group_id=g, session_timeout_ms=ms.GROUP_MIN_SESSION_TIMEOUT_MS,
                                           rebalance_timeout_ms=ms.GROUP_MIN_SESSION_TIMEOUT_MS, topics=["t"]))
    assert r.error == E.NONE
    return m, r.member_id, r.generation_id


def test_commits_while_completing_rebalance():
    m, mid, gen = joined_group()
    assert m.groups["g"].state == ms.COMPLETING
    assert m.check_commit("g", gen, mid) == E.REBALANCE_IN_PROGRESS           # not yet synced
    assert m.check_commit("g", gen, mid, transactional=True) == E.NONE        # TxnOffsetCommit has no such rule
    assert m.check_commit("g", -1, "") == E.UNKNOWN_MEMBER_ID                 # memberless, group not empty
    assert m.check_commit("g", -1, "", transactional=True) == E.NONE
    assert m.check_commit("g", gen + 1, mid) == E.ILLEGAL_GENERATION
    assert m.check_commit("g", gen, "someone-else") == E.UNKNOWN_MEMBER_ID
    s = m.sync(broker_pb2.SyncGroupRequest(group_id="g", member_id=mid, generation_id=gen))
    assert s.error == E.NONE and m.groups["g"].state == ms.STABLE
    assert m.check_commit("g", gen, mid) == E.NONE


def test_standalone_commits_to_empty_or_unknown_groups():
    m = ms.GroupMembership()
    assert m.check_commit("nobody", -1, "") == E.NONE
    assert m.check_commit("nobody", 3, "") == E.ILLEGAL_GENERATION            # a generation of no group
    assert m.check_commit("nobody", 3, "", transactional=True) == E.UNKNOWN_MEMBER_ID
