"""The C walker over a Kafka batch's records (`eoslab.common._records_native`) against the Python one:
it answers only what the Python walker answers, and leaves every section the Python walker refuses to it."""
import shutil
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslab.common import kafka_record_section as section
from tests.kafka_protocol.test_codec_fuzz import _RECORD   # (key, value, timestamp, headers), timestamps over 2^41 ms

pytestmark = pytest.mark.fast


def _native():
    return pytest.importorskip("eoslab.common._records_native", reason="built without the C walker").check_records


def test_the_c_walker_is_built_with_the_package_where_a_compiler_is():
    """The package's install builds it (pyproject's ext-modules), and check_records goes through it."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here: the package installs without the C walker")
    assert section._native_check is _native()


def test_the_pure_python_switch_leaves_the_c_walker_out():
    out = subprocess.run([sys.executable, "-c", "from eoslab.common import kafka_record_section as s;"
                          "print(s._native_check is None)"], env={"EOSLAB_PURE_PYTHON_RECORDS": "1"},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def _python(body, count):
    try:
        return section._check_records_py(body, count)
    except section.BatchFormatError as e:
        return e




@settings(max_examples=500, deadline=None)
@given(records=st.lists(_RECORD, min_size=0, max_size=80), edits=st.lists(
    st.tuples(st.integers(0, 2 ** 16), st.integers(0, 255)), max_size=3), cut=st.integers(0, 64),
    extra=st.integers(-2, 2), as_view=st.booleans(), skew=st.tuples(st.integers(0, 79), st.integers(-1, 1)))
def test_the_c_walker_answers_exactly_where_the_python_walker_answers_the_same(records, edits, cut, extra,
                                                                               as_view, skew):
    deltas = list(range(len(records)))
    if skew[0] < len(deltas):        # one record's offset delta off by one (or not)
        deltas[skew[0]] += skew[1]
    body, _ = section.encode_records([(k, v, ts, tuple(h)) for k, v, ts, h in records], deltas)
    data = bytearray(body)
    for pos, byte in edits:
        if data:
            data[pos % len(data)] = byte
    data = bytes(data[:len(data) - cut]) if cut < len(data) else bytes(data)
    count = len(records) + extra
    fast = _native()(memoryview(data) if as_view else data, count)
    slow = _python(data, count)
    if isinstance(slow, section.BatchFormatError):
        assert fast is None, f"the C walker accepted what Python refuses: {slow}"
    else:
        assert fast is None or fast == slow
    # a well-formed section is the C walker's, never left over
    if not edits and not cut and not extra and deltas == list(range(len(records))):
        assert fast == slow


_R = [0x0E, 0x00, 0x00, 0x00, 0x01, 0x02, 0x41, 0x00]    # record 0: length 7, no key, value "A", no headers


@pytest.mark.parametrize("body, count, code", [
    ([0x14] + _R[1:], 1, section.E.CORRUPT_MESSAGE),                               # length 10, 7 bytes follow
    (_R[:3] + [0x02] + _R[4:], 1, section.E.INVALID_RECORD),                      # offset delta 1 for record 0
    (_R[:4] + [0x03] + _R[5:], 1, section.E.CORRUPT_MESSAGE),                     # key length -2
    (_R[:7] + [0x01], 1, section.E.INVALID_RECORD),                               # -1 headers
    ([0x12] + _R[1:7] + [0x02, 0x01, 0x00], 1, section.E.INVALID_RECORD),         # a null header key
    (_R + [0x00], 1, section.E.CORRUPT_MESSAGE),                                  # a byte after the last record
    (_R, 2, section.E.CORRUPT_MESSAGE),                                           # a count past the records
    # a timestamp delta in 10 bytes: the Python walker reads it (any value), the C walker leaves it to it
    ([0x20, 0x00] + [0xFF] * 9 + [0x01] + _R[3:], 1, None),
])
def test_the_c_walker_leaves_what_it_does_not_accept_to_the_python_walker(body, count, code):
    body = bytes(body)
    assert _native()(bytes(_R), 1) == [0]
    assert _native()(body, count) is None
    # and check_records then answers as the Python walker does: Kafka's code, or the records
    if code is None:
        assert section.check_records(body, count) == [0]
    else:
        with pytest.raises(section.BatchFormatError) as e:
            section.check_records(body, count)
        assert e.value.code == code


def test_a_well_formed_section_of_keyless_and_keyed_records():
    body, _ = section.encode_records([(None, b"v", 5, ()), (b"k", b"v", 6, ((b"h", None),)), (None, None, 7, ())])
    assert _native()(body, 3) == [0, 2]
    assert _native()(b"", 0) == []
