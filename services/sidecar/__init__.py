"""The fault sidecar: network faults inside one service's network namespace, on gRPC command."""
