"""Every numeric option of the eoslab command line refuses what it cannot mean (inf, nan, negative, out of
range) with one line and exit 2, before doing anything."""
import pytest

from eoslab import argtypes
from eoslab.cli import main

pytestmark = pytest.mark.fast

BAD = [
    ["run", "--workload", "queue", "--out", "OUT", "--time-limit", "inf"],
    ["run", "--workload", "queue", "--out", "OUT", "--time-limit", "nan"],
    ["run", "--workload", "queue", "--out", "OUT", "--time-limit", "-1"],
    ["run", "--workload", "queue", "--out", "OUT", "--time-limit", "0"],
    ["run", "--workload", "queue", "--out", "OUT", "--time-limit", "1e300"],
    ["run", "--workload", "queue", "--out", "OUT", "--concurrency", "0"],
    ["run", "--workload", "queue", "--out", "OUT", "--seed", "-1"],
    ["produce", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--count", "1", "--connect-timeout", "-1"],
    ["produce", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--count", "1", "--connect-timeout", "nan"],
    ["produce", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--count", "1", "--size", "-1"],
    ["produce", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--count", "-3"],
    ["produce", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--count", "1", "--partitions", "0"],
    ["consume", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--timeout", "inf"],
    ["consume", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--connect-timeout", "0"],
    ["cluster", "up", "--brokers", "0"],
    ["cluster", "up", "--brokers", "1.5"],
    ["cluster", "up", "--session-timeout-ms", "-1"],
    ["sweep", "--workload", "queue", "--nemesis", "none", "--settings-matrix", "m.json", "--seeds", "0",
     "--out", "S"],
    ["sweep", "--workload", "queue", "--nemesis", "none", "--settings-matrix", "m.json", "--seeds", "1",
     "--time-limit", "inf", "--out", "S"],
]


@pytest.mark.parametrize("argv", BAD, ids=lambda a: " ".join(a[:1] + a[-2:]))
def test_bad_numbers_are_one_line_and_exit_2(argv, tmp_path, capsys):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("eoslab: argument --"), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text,value", [("30", 30.0), ("0.5", 0.5), ("604800", 604800.0)])
def test_good_time_limits_pass(text, value):
    assert argtypes.float_range(0, 7 * 86400, low_open=True)(text) == value
