"""Tests of the history checker (readers, models, linearizability)."""
