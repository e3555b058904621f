"""The committed stubs in eoslab/v1 are exactly what `make proto` generates from proto/."""
import filecmp
import pathlib

import pytest

pytestmark = pytest.mark.fast
ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_generated_stubs_are_current(tmp_path):
    pytest.importorskip("grpc_tools")
    import importlib.util
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "tools" / "gen_proto.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.generate(tmp_path)
    fresh = sorted(p.name for p in (tmp_path / "eoslab" / "v1").iterdir())
    committed = sorted(p.name for p in (ROOT / "eoslab" / "v1").iterdir() if p.suffix in (".py", ".pyi")
                       and p.name != "__init__.py")
    assert fresh == committed, "run `make proto`: stub files differ from proto/"
    _, mismatch, errors = filecmp.cmpfiles(tmp_path / "eoslab" / "v1", ROOT / "eoslab" / "v1", fresh, shallow=False)
    assert not mismatch and not errors, f"run `make proto`: stale stubs {mismatch + errors}"
