"""K8sRuntime's node <-> pod naming, the one part of it that can run without an API server.

Node names are the lab's ("broker-1": id 1); pods are StatefulSet ordinals ("broker-0").
"""
import pytest

from cluster.k8s_runtime import K8sRuntimeError, node_name, pod_name

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("node, pod", [("broker-1", "broker-0"), ("broker-3", "broker-2"),
                                       ("controller-2", "controller-1"), ("zookeeper", "zookeeper-0"),
                                       ("txn-coordinator-1", "txn-coordinator-0")])
def test_node_and_pod_names_map_both_ways(node, pod):
    assert pod_name(node) == pod
    assert node_name(pod) == node


@pytest.mark.parametrize("bad", ["broker-0", "broker", "kafka-1", "broker-x", ""])
def test_unknown_nodes_are_refused(bad):
    with pytest.raises(K8sRuntimeError):
        pod_name(bad)
