"""Moved to eoslab.common.rpc (clients and services both use it); this name stays the same module."""
import sys

from eoslab.common import rpc as _module

sys.modules[__name__] = _module
