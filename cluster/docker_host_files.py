"""DockerHostFiles: what a Docker cluster's services use from the host, as DockerRuntime's methods.

Guarantees: the runtime methods of cluster.runtime.Runtime for the clock and
disk faults, answered for a compose project: the libfaketime control files
(cluster.docker_clock: host files bind-mounted read-only into each service)
and the lazy filesystems (cluster.docker_disks: host FUSE mounts bound over
the brokers' and ZooKeeper's data volumes). The callers (cluster.faketime,
the disk fault packages, the scenarios) ask the runtime and never which
runtime it is. Mixed into DockerRuntime.
"""
from __future__ import annotations

from cluster import docker_clock, docker_disks


class DockerHostFiles:
    """Clock control files and lazy disks of a DockerRuntime (its `project`, `nodes()`, `_check`)."""

    disk_kind: str | None = None      # "lazy": `up` puts the brokers' and ZooKeeper's data on lazy filesystems

    def clock_enabled(self) -> bool:
        return docker_clock.enabled(self)

    def enable_clock(self) -> None:
        docker_clock.enable(self)

    def clock_control_file(self, node: str) -> str:
        self._check(node)
        return docker_clock.service_control_file(self, node)

    def lazy_disks(self) -> bool:
        return docker_disks.enabled(self)

    def disk(self, node: str):
        self._check(node)
        return docker_disks.disk(self, node)

    def _compose_overrides(self) -> list[str]:
        """The `-f` arguments every compose call adds: the clock preload's and the lazy disks' overrides."""
        return [*docker_clock.compose_files(self), *docker_disks.compose_files(self)]

    def _reset_host_files(self) -> None:
        """Before `up`: every clock at +0, fresh lazy filesystems (or none), what a crashed run left gone."""
        docker_clock.reset(self)
        docker_disks.reset(self)

    def _forget_host_files(self) -> None:
        """After `down`: no control file, no lazyfs mount, no override left."""
        docker_clock.forget(self)
        docker_disks.forget(self)
