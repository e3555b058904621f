"""cluster.docker_freeze: docker pause and unpause asked again when runc could not freeze or thaw the
cgroup in time (measured: 2 of 60 cycles at load 21), never for another error. The container stands
in for the Docker SDK's Container (its pause/unpause/reload/status): the engine's own "unable to
freeze" cannot be provoked on demand."""
import pytest

docker_errors = pytest.importorskip("docker.errors")

from cluster import docker_freeze  # noqa: E402

pytestmark = pytest.mark.fast


class Container:
    def __init__(self, failures: list[str], status: str = "running"):
        self.failures, self.status, self.calls = list(failures), status, 0

    def _call(self, after: str) -> None:
        self.calls += 1
        if self.failures:
            raise docker_errors.APIError(self.failures.pop(0))
        self.status = after

    def pause(self):
        self._call("paused")

    def unpause(self):
        self._call("running")

    def reload(self):
        pass


FREEZE = "OCI runtime pause failed: unable to freeze: unknown"


def test_a_pause_runc_could_not_freeze_is_asked_again_until_it_holds():
    c, waits = Container([FREEZE, FREEZE]), []
    docker_freeze.freeze(c, sleep=waits.append)
    assert c.status == "paused" and c.calls == 3 and waits == [0.2, 0.4]


def test_a_pause_that_keeps_failing_raises_the_engines_error_after_the_last_attempt():
    c = Container([FREEZE] * docker_freeze.FREEZE_ATTEMPTS)
    with pytest.raises(docker_errors.APIError, match="unable to freeze"):
        docker_freeze.freeze(c, sleep=lambda s: None)
    assert c.calls == docker_freeze.FREEZE_ATTEMPTS


def test_another_engine_error_is_raised_at_once():
    c = Container(["Container abc is not running"])
    with pytest.raises(docker_errors.APIError, match="not running"):
        docker_freeze.freeze(c, sleep=lambda s: None)
    assert c.calls == 1


def test_an_unpause_runc_could_not_thaw_is_asked_again():
    c, waits = Container(["OCI runtime resume failed: unable to thaw"], status="paused"), []
    docker_freeze.thaw(c, sleep=waits.append)
    assert c.status == "running" and c.calls == 2 and waits == [0.2]
