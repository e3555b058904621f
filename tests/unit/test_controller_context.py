"""ControllerContext's config rules: a topic's own value, else the brokers' dynamic cluster default, else
the static setting."""
from services.controller.context import ControllerContext


def test_a_topics_own_value_wins_then_the_cluster_default_then_the_static_one():
    ctx = ControllerContext()
    ctx.configs = {"own": {"unclean.leader.election.enable": "false", "min.insync.replicas": "3"}, "plain": {}}
    assert not ctx.unclean_allowed("plain") and ctx.min_isr("plain", 2) == 2
    ctx.cluster_defaults = {"unclean.leader.election.enable": "True", "min.insync.replicas": "1"}
    assert ctx.unclean_allowed("plain") and ctx.min_isr("plain", 2) == 1
    assert not ctx.unclean_allowed("own") and ctx.min_isr("own", 2) == 3
    ctx.cluster_defaults = {"min.insync.replicas": "not a number"}
    assert ctx.min_isr("plain", 2) == 2


def test_resigning_keeps_the_cluster_default():
    ctx = ControllerContext()
    ctx.cluster_defaults = {"unclean.leader.election.enable": "true"}
    ctx.clear()
    assert ctx.unclean_allowed("any")
