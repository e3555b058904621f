"""Plumbing shared by every eoslab service: ZooKeeper paths, gRPC server and channel setup."""
