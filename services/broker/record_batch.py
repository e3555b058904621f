"""The lab's record batch format; it lives in eoslab.common.record_batch, shared by clients and services."""
from eoslab.common.record_batch import *  # noqa: F401,F403
