"""History readers (JSONL, Jepsen EDN, Jepsen log), format sniffing and pairing."""
from __future__ import annotations

import gzip
import io
import json

import pytest

from checker.formats import open_history, pair, pair_calls, resolved_value, sniff_format
from checker.formats.edn import read_edn
from checker.formats.edn_split import split_forms
from checker.formats.jepsen_log import read_jepsen_log
from checker.history import NIL_READS_UNKNOWN, UNKNOWN, HistoryError, Op

pytestmark = pytest.mark.fast


def edn(text: str) -> list[Op]:
    return list(read_edn(io.StringIO(text)))


def log(text: str) -> list[Op]:
    return list(read_jepsen_log(io.StringIO(text)))


def op(index, process, type, f, value=None, **kw) -> Op:
    return Op(index=index, process=process, type=type, f=f, value=value, **kw)


# --------------------------------------------------------------------------- EDN

def test_edn_one_vector_of_maps():
    ops = edn("[{:process 0, :type :invoke, :f :write, :value 3}\n"
              " {:process 0, :type :ok, :f :write, :value 3}]")
    assert [(o.index, o.process, o.type, o.f, o.value) for o in ops] == \
        [(0, 0, "invoke", "write", 3), (1, 0, "ok", "write", 3)]


def test_edn_maps_one_after_another_spanning_lines_with_comments():
    text = ("; a comment\n"
            "{:type :invoke,\n :f :read,   ; inline comment with a ] bracket\n :process 2}\n"
            "\n"
            "{:type :ok, :f :read, :value 1,\n :process 2}\n")
    ops = edn(text)
    assert [(o.type, o.f, o.value, o.line) for o in ops] == [("invoke", "read", None, 2),
                                                          ("ok", "read", 1, 6)]


def test_edn_top_level_list():
    ops = edn("({:process 1 :type :invoke :f :read}\n {:process 1 :type :ok :f :read :value 0})")
    assert [o.type for o in ops] == ["invoke", "ok"]


def test_edn_values_become_plain_data():
    (o,) = edn('{:process :nemesis :type :info :f :start :value {:nodes [:n1 :n2] :why nil '
               ':s #{3 1 2} :l (1 :a) :ns :foo/bar :c \\x}}')
    assert o.process == "nemesis" and o.f == "start" and o.type == "info"
    assert o.value == {"nodes": ["n1", "n2"], "why": None, "s": [1, 2, 3], "l": [1, "a"],
                       "ns": "foo/bar", "c": "x"}
    assert not o.is_client


def test_edn_key_field_goes_to_op_key_and_tuples_stay():
    a, b = edn("{:process 0 :type :invoke :f :put :key \"k1\" :value \"v\"}\n"
               "{:process 1 :type :invoke :f :write :value [:k2 3]}")
    assert (a.key, a.value) == ("k1", "v")
    assert (b.key, b.value) == (None, ["k2", 3])


def test_edn_index_time_and_extra_fields_are_kept():
    (o,) = edn("{:index 42 :time 1000 :process 3 :type :fail :f :write :value 1 "
               ":error [:timeout nil] :node \"n1\"}")
    assert (o.index, o.time, o.error, o.extra) == (42, 1000, ["timeout", None], {"node": "n1"})


def test_edn_strings_chars_and_brackets_inside_do_not_confuse_the_splitter():
    text = ('[{:process 0 :type :invoke :f :write :value "a ] } ) \\" ; not a comment"}\n'
            ' {:process 0 :type :ok :f :write :value \\]}\n'
            ' {:process 1 :type :invoke :f :write :value [\\( \\[ \\{]}]')
    ops = edn(text)
    assert [o.value for o in ops] == ['a ] } ) " ; not a comment', "]", ["(", "[", "{"]]


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 8, 13, 64, 4096])
def test_edn_splitter_gives_the_same_forms_for_any_chunk_size(chunk):
    text = ('; head\n[{:a "x\\"]" :b [1 2 (3)]}\n {:c \\}}   ;; tail ]\n'
            ' #_ {:dropped 1} {:d #{1 2}}\n{:e\n\n 5}]\n{:f 6}\n')
    forms = list(split_forms(io.StringIO(text), chunk_size=chunk))
    assert [t for t, _ in forms] == ['{:a "x\\"]" :b [1 2 (3)]}', "{:c \\}}", "{:d #{1 2}}",
                                     "{:e\n\n 5}", "{:f 6}"]
    assert [line for _, line in forms] == [2, 3, 4, 5, 8]


def test_edn_discard_and_record_literals():
    ops = edn("[#_ {:process 9 :type :ok :f :x}\n"
              " #jepsen.history.Op{:index 0 :process 1 :type :invoke :f :read :value nil}]")
    assert len(ops) == 1 and (ops[0].process, ops[0].f) == (1, "read")


def test_edn_marks_ok_completions_carrying_nil():
    inv, ok, ok3 = edn("{:process 1 :type :invoke :f :read :value nil}\n"
                       "{:process 1 :type :ok :f :read :value nil}\n"
                       "{:process 1 :type :ok :f :read :value 3}")
    assert NIL_READS_UNKNOWN not in inv.extra
    assert ok.extra[NIL_READS_UNKNOWN] is True
    assert NIL_READS_UNKNOWN not in ok3.extra


class TrickleStream(io.StringIO):
    """A stream that records how far it has been read."""

    def __init__(self, text):
        super().__init__(text)
        self.high = 0

    def read(self, size=-1):
        s = super().read(size)
        self.high = self.tell()
        return s

    def readline(self, size=-1):
        s = super().readline(size)
        self.high = self.tell()
        return s


def test_edn_reader_streams_instead_of_reading_the_whole_file():
    one = "{:process 1, :type :invoke, :f :write, :value 1}\n"
    text = "[" + one * 20000 + "]"
    stream = TrickleStream(text)
    it = read_edn(stream)
    first = next(it)
    assert first.f == "write"
    assert stream.high < len(text) / 4


@pytest.mark.parametrize("text, line, words", [
    ("{:process 1 :type :invoke}\n{:process 1 :type}", 2, "bad EDN"),
    ("[{:process 1 :type :invoke :f :read}\n {:process 1 :type :ok :f :read", 2, "never closed"),
    ("{:process 1 :type :invoke :f :read}\n]", 2, "unmatched"),
    ("[{:process 1 :type :invoke :f :read}\n 42]", 2, "expected an op map"),
    ("{:process 1\n :type :invoke :f [:read}", 2, "expected ']'"),
    ("{:process 1 :type :weird :f :read}", 1, "type must be one of"),
    ('{:process 1 :type :invoke :f "unterminated}', 1, "never closed"),
])
def test_bad_edn_raises_naming_the_line(text, line, words):
    with pytest.raises(HistoryError) as e:
        edn(text)
    assert f"line {line}" in str(e.value) and words in str(e.value)


# -------------------------------------------------------------------- Jepsen log

LOG = """\
2017-01-01 12:00:00,000 INFO  jepsen.core - Running test
INFO  jepsen.util - 2\t:invoke\t:write\t4
INFO  jepsen.util - 2\t:ok\t:write\t4
INFO  jepsen.util - 3   :invoke   :read   nil
INFO  jepsen.util - 3   :ok   :read   4
INFO  jepsen.util - 1\t:invoke\t:cas\t[1 4]
INFO  jepsen.util - 1\t:fail\t:cas\t[1 4]
INFO  jepsen.util - :nemesis\t:info\t:start\tCut off {:n1 #{:n2}}
INFO  jepsen.util - 3\t:invoke\t:read\tnil
INFO  jepsen.util - 3\t:fail\t:read\t:timed-out
INFO  jepsen.util - 4\t:invoke\t:write\t0
WARN  jepsen.core - something else happened :ok
INFO  jepsen.util - 4\t:info\t:write\t:timed-out
"""


def test_jepsen_log_reads_op_lines_and_skips_the_rest():
    ops = log(LOG)
    assert [(o.process, o.type, o.f, o.value, o.line) for o in ops] == [
        (2, "invoke", "write", 4, 2), (2, "ok", "write", 4, 3),
        (3, "invoke", "read", None, 4), (3, "ok", "read", 4, 5),
        (1, "invoke", "cas", [1, 4], 6), (1, "fail", "cas", [1, 4], 7),
        ("nemesis", "info", "start", "Cut off {:n1 #{:n2}}", 8),
        (3, "invoke", "read", None, 9), (3, "fail", "read", None, 10),
        (4, "invoke", "write", 0, 11), (4, "info", "write", 0, 13)]
    assert [o.index for o in ops] == list(range(11))


def test_jepsen_log_timeouts_go_to_error_and_keep_the_invoked_value():
    ops = log(LOG)
    read_fail, write_info = ops[8], ops[10]
    assert (read_fail.error, read_fail.value) == ("timed-out", None)
    assert (write_info.error, write_info.value) == ("timed-out", 0)
    (c,) = [c for c in pair_calls(ops) if c.f == "write" and c.process == 4]
    assert c.result is UNKNOWN and c.end is None


def test_jepsen_log_value_then_error_fields():
    ops = log("0\t:invoke\t:write\t3\n0\t:info\t:write\t3\t:timeout\n")
    assert (ops[1].value, ops[1].error) == (3, "timeout")


def test_jepsen_log_keyword_values_on_ok_are_values():
    ops = log("0 :invoke :add :a\n0 :ok :add :a\n")
    assert (ops[1].value, ops[1].error) == ("a", None)


def test_jepsen_log_bad_value_raises_naming_the_line():
    with pytest.raises(HistoryError, match="line 2: cannot read the value"):
        log("0\t:invoke\t:write\t1\n0\t:ok\t:write\t{:a\n")


def test_jepsen_log_without_any_op_line_is_an_error():
    with pytest.raises(HistoryError, match="no Jepsen op lines"):
        log("hello\nworld\n")


# ----------------------------------------------------------------- open_history

def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("head, fmt", [
    ('{"index": 0, "process": 0}', "jsonl"),
    ("  {}\n", "jsonl"),
    ("[{:process 0}]", "edn"),
    ("; comment\n; more\n{:process 0}", "edn"),
    ("({:process 0})", "edn"),
    ("INFO jepsen.util - 0 :invoke :read nil", "jepsen-log"),
    ("", "jsonl"),
])
def test_sniff_format(head, fmt):
    assert sniff_format(head) == fmt


def test_open_history_auto_detects_each_format(tmp_path):
    j = write(tmp_path, "h.jsonl", json.dumps({"process": 0, "type": "invoke", "f": "read"}) + "\n")
    e = write(tmp_path, "h.edn", "; c\n{:process 0 :type :invoke :f :read}\n")
    lg = write(tmp_path, "h.log", "INFO  jepsen.util - 0\t:invoke\t:read\tnil\n")
    for p in (j, e, lg):
        (o,) = list(open_history(p))
        assert (o.process, o.type, o.f, o.value) == (0, "invoke", "read", None)


def test_open_history_explicit_format_overrides_sniffing(tmp_path):
    p = write(tmp_path, "h.txt", "{:process 0 :type :invoke :f :read}\n")
    with pytest.raises(HistoryError, match="line 1: not valid JSON"):
        list(open_history(p, fmt="jsonl"))
    assert len(list(open_history(p, fmt="edn"))) == 1


def test_open_history_reads_gzip(tmp_path):
    p = tmp_path / "h.edn.gz"
    with gzip.open(p, "wt") as f:
        f.write("[{:process 0 :type :invoke :f :read}]")
    assert len(list(open_history(p))) == 1


def test_open_history_missing_file_raises_at_once(tmp_path):
    with pytest.raises(HistoryError, match="no such file"):
        open_history(tmp_path / "nope.edn")


def test_open_history_unknown_format_raises(tmp_path):
    p = write(tmp_path, "h.edn", "[]")
    with pytest.raises(HistoryError, match="unknown history format 'yaml'"):
        open_history(p, fmt="yaml")


def test_open_history_bad_json_names_file_and_line(tmp_path):
    p = write(tmp_path, "h.jsonl", '{"process": 0, "type": "invoke", "f": "read"}\n{"process": 0,\n')
    with pytest.raises(HistoryError) as e:
        list(open_history(p))
    assert str(e.value).startswith(str(p)) and "line 2: not valid JSON" in str(e.value)


def test_open_history_bad_edn_names_file_and_line(tmp_path):
    p = write(tmp_path, "h.edn", "{:process 0 :type :invoke :f :read}\n{:process 0 :type :ok :f}\n")
    with pytest.raises(HistoryError, match=r"h\.edn: line 2: bad EDN"):
        list(open_history(p))


# ------------------------------------------------------------------------ pairing

def test_pair_matches_completions_to_invokes_per_process():
    ops = [op(0, 1, "invoke", "write", 1), op(1, 2, "invoke", "read"),
           op(2, 2, "ok", "read", 0), op(3, 1, "ok", "write", 1), op(4, 3, "invoke", "write", 2)]
    pairs = pair(ops)
    assert [(i.index, c.index if c else None) for i, c in pairs] == [(0, 3), (1, 2), (4, None)]


def test_pair_ignores_nemesis_ops():
    ops = [op(0, "nemesis", "info", "start"), op(1, 0, "invoke", "read"),
           op(2, "nemesis", "info", "stop"), op(3, 0, "ok", "read", 1)]
    assert [(i.index, c.index) for i, c in pair(ops)] == [(1, 3)]


def test_double_invoke_is_an_error_naming_the_line():
    ops = [op(0, 5, "invoke", "read", line=10), op(1, 5, "invoke", "write", 1, line=11)]
    with pytest.raises(HistoryError, match=r"line 11: process 5 .*double invoke"):
        pair(ops)


def test_completion_without_invoke_is_an_error_naming_the_line():
    with pytest.raises(HistoryError, match="line 7: process 4 completes 'read' .*without an invoke"):
        pair([op(0, 4, "ok", "read", 1, line=7)])


def test_completion_without_invoke_names_the_index_when_there_is_no_line():
    with pytest.raises(HistoryError, match="op index 3: "):
        pair([op(3, 4, "fail", "read")])


def test_completion_with_another_f_is_an_error():
    with pytest.raises(HistoryError, match="line 2: process 0 completes 'write' but invoked 'read'"):
        pair([op(0, 0, "invoke", "read", line=1), op(1, 0, "ok", "write", 1, line=2)])


def test_process_may_invoke_again_after_info():
    ops = [op(0, 0, "invoke", "write", 1), op(1, 0, "info", "write", 1),
           op(2, 0, "invoke", "write", 2), op(3, 0, "ok", "write", 2)]
    assert len(pair(ops)) == 2


def test_pair_calls_semantics():
    ops = [op(0, 0, "invoke", "write", 1), op(1, 1, "invoke", "write", 2),
           op(2, 2, "invoke", "read"), op(3, 0, "fail", "write", 1),
           op(4, 1, "info", "write", 2), op(5, 2, "ok", "read", 7), op(6, 3, "invoke", "read")]
    calls = pair_calls(ops)
    assert [c.invoke.index for c in calls] == [1, 2, 6]           # the fail op is gone
    info, read, pending = calls
    assert (info.start, info.end, info.result, info.value) == (1, None, UNKNOWN, 2)
    assert (read.start, read.end, read.result) == (2, 5, 7)
    assert (pending.end, pending.result) == (None, UNKNOWN)


def test_resolved_value_ok_completion_supersedes_invoke():
    assert resolved_value(op(0, 0, "invoke", "read"), op(1, 0, "ok", "read", 3)) == 3
    assert resolved_value(op(0, 0, "invoke", "write", 4), op(1, 0, "ok", "write", None)) == 4
    assert resolved_value(op(0, 0, "invoke", "write", 4), op(1, 0, "info", "write", 9)) == 4
    assert resolved_value(op(0, 0, "invoke", "write", 4), None) == 4
