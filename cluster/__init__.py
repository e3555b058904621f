"""The cluster harness: runtimes (local processes, Docker, Kubernetes), topology, workloads, nemesis, history."""
