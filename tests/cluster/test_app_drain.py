"""The app harness's rule for when the wait after the heal is over (cluster.apps.run.drained)."""
import pytest

from cluster.apps.run import drained

pytestmark = pytest.mark.fast


def test_output_quiet_during_the_faults_still_gets_quiet_s_after_the_heal():
    # the last output was 28 s before the heal (the app was held up by the faults): 2 s after the heal
    # the application has had no chance yet to resume
    assert drained(now=102.5, healed_at=100.0, last_output=72.0, quiet_s=30.0, seeding_done=True, missing=5) is None
    assert "no new output" in drained(now=130.5, healed_at=100.0, last_output=72.0, quiet_s=30.0,
                                      seeding_done=True, missing=5)


def test_quiet_counts_from_the_last_output_after_the_heal():
    assert drained(now=135.0, healed_at=100.0, last_output=110.0, quiet_s=30.0, seeding_done=True, missing=1) is None
    assert drained(now=141.0, healed_at=100.0, last_output=110.0, quiet_s=30.0, seeding_done=True, missing=1)


def test_done_when_every_acknowledged_input_is_seen_and_never_while_seeding():
    assert drained(now=100.1, healed_at=100.0, last_output=100.0, quiet_s=30.0, seeding_done=True,
                   missing=0) == "every acknowledged input is in the output"
    assert drained(now=999.0, healed_at=100.0, last_output=0.0, quiet_s=30.0, seeding_done=False, missing=0) is None
