"""Kafka's error codes as the clients see them; the table lives in eoslab.common.errors, shared by clients
and services."""
from eoslab.common.errors import *  # noqa: F401,F403
