"""eoslab services: each one an OS process with its own gRPC server (python -m services.<name>)."""
