"""A lazy filesystem: a FUSE mirror of a directory that keeps every write since a file's last
fsync droppable, so a fault can lose it as a power loss would (like Jepsen's LazyFS).

Guarantees: readers see every write at once (page-cache semantics); a byte made durable by
fsync/fdatasync is never lost by `lose-unsynced` or `torn-write`; the mount process is
controlled over a Unix socket and from Python through `LazyFs` (control.py). See
docs/lazyfs.md. Nothing here imports the FUSE binding until a filesystem is mounted.
"""
from cluster.lazyfs.control import LazyFs, LazyFsError, LazyFsUnavailable, cleanup_stale, lazyfs_mounts

__all__ = ["LazyFs", "LazyFsError", "LazyFsUnavailable", "cleanup_stale", "lazyfs_mounts"]
