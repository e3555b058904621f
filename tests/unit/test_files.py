"""run.json and results.json are replaced whole: a write that fails leaves the old file, never a
torn or empty one (eoslab serve and a sweep's resume read them while runs write them)."""
import json
import os

import pytest

from checker.result import write_results
from cluster.run import _write_meta
from eoslab.common.files import replace_json, replace_text

pytestmark = pytest.mark.fast


class Unwritable:
    def __str__(self):                  # not even as text (results.json writes str() of the unknown)
        raise TypeError("cannot be written")


def test_a_failed_replace_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "x.json"
    replace_json(str(path), {"n": 1})
    with pytest.raises(TypeError):
        replace_json(str(path), {"n": 2, "bad": Unwritable()})
    assert json.loads(path.read_text()) == {"n": 1}
    replace_text(str(path), '{"n": 3}\n')
    assert json.loads(path.read_text()) == {"n": 3} and os.listdir(tmp_path) == ["x.json"]


def test_results_json_and_run_json_survive_a_write_that_fails(tmp_path):
    write_results(str(tmp_path), {"valid": True})
    with pytest.raises(TypeError):
        write_results(str(tmp_path), {"valid": False, "stats": {"x": Unwritable()}})
    assert json.loads((tmp_path / "results.json").read_text()) == {"valid": True}
    _write_meta(str(tmp_path), {"workload": "txn"})
    with pytest.raises(TypeError):
        _write_meta(str(tmp_path), {"workload": "txn", "oops": Unwritable()})
    assert json.loads((tmp_path / "run.json").read_text()) == {"workload": "txn"}
    assert sorted(os.listdir(tmp_path)) == ["results.json", "run.json"]
