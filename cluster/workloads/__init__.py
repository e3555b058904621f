"""Workloads: clients that drive the cluster and record what they saw (Jepsen's client role)."""
