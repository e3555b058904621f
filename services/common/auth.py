"""Moved to eoslab.common.auth (clients and services both use it); this name stays the same module."""
import sys

from eoslab.common import auth as _module

sys.modules[__name__] = _module
