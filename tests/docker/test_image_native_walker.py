"""The image's brokers walk a Kafka batch's records in C (the package's optional extension, compiled in the
image's build with the clock faults' compiler), and answer malformed records with the Python walker's
Kafka error codes, as a broker outside the image does."""
from __future__ import annotations

import subprocess

import pytest

from tests.docker.conftest import DOCKER

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]

PROBE = """
from eoslab.common import kafka_record_section as s
assert s._native_check is not None, "the C walker is not in the image"
body, _ = s.encode_records([(None, b"v", 1, ()), (b"k", b"v", 2, ())])
assert s.check_records(body, 2) == [0]
try:
    s.check_records(body[:-1], 2)
except s.BatchFormatError as e:
    print("refused", e.code)
"""


def test_the_image_has_the_c_records_walker_and_it_defers_bad_input_to_python(docker_engine):
    r = subprocess.run([DOCKER, "run", "--rm", "--network", "none", "--entrypoint", "/opt/eoslab/bin/python",
                        docker_engine, "-c", PROBE], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "refused 2"          # CORRUPT_MESSAGE, from the Python walker
