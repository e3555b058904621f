"""tools/librdkafka_conformance.py's pure parts: reading the test-runner's output into per-test
results, the test.conf it writes, the test table it reads, the exclusions and the arguments."""
import importlib.util
import os

import pytest

pytestmark = pytest.mark.fast

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "librdkafka_conformance.py")
_spec = importlib.util.spec_from_file_location("librdkafka_conformance", _PATH)
conf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conf)

G, R, Y, C, Z = "\x1b[32m", "\x1b[31m", "\x1b[33m", "\x1b[36m", "\x1b[0m"

RUNNER_OUTPUT = f"""\
[0103_transactions           / 66.872s] TEST FAILURE
{R}### Test "0103_transactions (do_test_fenced_txn:760: produce after fence)" failed at test.c:2317:test_dr_msg_cb() at Thu Nov 26 02:10:30 2026: ###
do_test_fenced_txn:760: produce after fence: Message delivery failed: Unknown topic or partition
### Test "0103_transactions (later)" failed at test.c:1:f() at Thu Nov 26 02:10:31 2026: ###
a later failure
TEST 20261126020853 (bare, scenario default) SUMMARY
#==================================================================#
|{G} <MAIN>                                   |     PASSED |  68.080s {Z}|
|{G} 0001_multiobj                            |     PASSED |   1.980s {Z}|
|{R} 0103_transactions                        |     FAILED |  66.872s {Z}|{R} do_test_fenced_txn:760: produce after fence: Message delivery failed{Z}
|{C} 0045_subscribe_update_topic_remove       |    SKIPPED |   0.000s {Z}|{C} Scenario noautocreate not matched{Z}
#==================================================================#
"""


def test_summary_lines_give_one_result_per_test_with_the_first_failure_line():
    results = conf.parse_output(RUNNER_OUTPUT)
    assert set(results) == {"0001_multiobj", "0103_transactions", "0045_subscribe_update_topic_remove"}
    assert results["0001_multiobj"] == {"result": "pass", "reason": ""}
    assert results["0103_transactions"]["result"] == "fail"
    assert results["0103_transactions"]["reason"] == "do_test_fenced_txn:760: produce after fence: Message delivery failed"
    assert results["0045_subscribe_update_topic_remove"] == {
        "result": "skip", "reason": "Scenario noautocreate not matched"}


def test_a_runner_killed_before_its_summary_still_reports_the_first_failure():
    killed = RUNNER_OUTPUT.split("TEST 2026")[0]
    results = conf.parse_output(killed)
    assert results == {"0103_transactions": {
        "result": "fail",
        "reason": "do_test_fenced_txn:760: produce after fence: Message delivery failed: Unknown topic or partition"}}


def test_a_test_still_running_at_the_summary_is_a_failure():
    out = f"|{Y} 0030_offset_commit                       |    RUNNING |  10.000s {Z}|\n"
    assert conf.parse_output(out)["0030_offset_commit"] == {
        "result": "fail", "reason": "still running when the runner ended"}


def test_output_without_tests_gives_no_results():
    assert conf.parse_output("Git version: v2.15.0\nno summary here\n") == {}


def test_test_conf_points_the_tests_at_the_cluster():
    text = conf.test_conf("127.77.5.21:19192,127.77.5.22:19192", {"test.topic.prefix": "lab"})
    lines = text.splitlines()
    assert lines[0] == "bootstrap.servers=127.77.5.21:19192,127.77.5.22:19192"
    assert "test.topic.prefix=lab" in lines
    assert all(ln.count("=") >= 1 for ln in lines) and text.endswith("\n")


TEST_C = """
struct test tests[] = {
    {.name = "<MAIN>", .flags = TEST_F_LOCAL},
    _TEST(0000_unittests, TEST_F_LOCAL, _THRES(.ucpu = 100.0)),
    _TEST(0001_multiobj, 0),
    _TEST(0028_long_topicnames, TEST_F_KNOWN_ISSUE, TEST_BRKVER(0, 9, 0, 0)),
    _TEST(0105_transactions_mock, TEST_F_LOCAL, TEST_BRKVER(0, 11, 0, 0)),
    _TEST(0103_transactions, 0, TEST_BRKVER(0, 11, 0, 0)),
    _TEST(8000_idle, TEST_F_MANUAL),
    {NULL}
};
"""


def test_the_table_is_read_and_only_broker_tests_are_kept():
    table = conf.test_table(TEST_C)
    assert [n for n, _ in table] == ["0000_unittests", "0001_multiobj", "0028_long_topicnames",
                                     "0105_transactions_mock", "0103_transactions", "8000_idle"]
    assert [n for n, _ in conf.broker_tests(table)] == ["0001_multiobj", "0028_long_topicnames",
                                                        "0103_transactions"]


def test_priority_tests_come_first_then_the_rest_in_number_order():
    assert conf.order(["0042", "0103", "0001", "0007"], first=["0103", "9999"]) == ["0103", "0001", "0007", "0042"]


def test_every_exclusion_is_a_test_number_with_a_reason():
    assert conf.EXCLUDED
    for number, reason in conf.EXCLUDED.items():
        assert len(number) == 4 and number.isdigit()
        assert len(reason) > 10
    assert "share" in conf.EXCLUDED["0171"] and "SSL" in conf.EXCLUDED["0097"]
    assert not set(conf.EXCLUDED) & set(conf.PRIORITY)


def test_header_comment_skips_the_license_and_keeps_the_first_sentence():
    text = "/*\n * Copyright (c) 2012, Magnus\n */\n#include \"rdkafka.h\" /* for Kafka driver */\n" \
           "/* Typical include path */\n/**\n * @name Producer transaction tests.\n * More.\n */\n"
    assert conf.header_comment(text) == "Producer transaction tests"
    assert conf.header_comment("/** " + "x y " * 100 + " */", limit=20).endswith("…")


def test_without_a_header_the_comment_above_main_is_used():
    text = "/*\n * Copyright x\n */\nstatic int x;\n/** @brief a helper we skip */\nstatic void f(void) {}\n" \
           "/**\n * @brief Test the retry path.\n */\nint main_0076_produce_retry(int argc, char **argv) {\n"
    assert conf.header_comment(text, main="main_0076_produce_retry") == "Test the retry path"
    assert conf.header_comment(text) == ""


def test_markdown_escapes_pipes_and_has_one_row_per_test():
    md = conf.markdown([{"test": "0001_a", "what": "a|b", "result": "fail", "reason": "x\ny"}])
    rows = md.splitlines()
    assert len(rows) == 3 and rows[2] == "| 0001_a | a\\|b | fail | x y |"


@pytest.mark.parametrize("argv,fragment", [
    (["--tests", "1,0103"], "4-digit"),
    (["--parallel", "0"], ">= 1"),
    (["--kafka-version", "9.9"], "invalid choice"),
])
def test_bad_arguments_are_one_error_line(argv, fragment, capsys):
    assert conf.main(argv + ["--mirror", "/"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("librdkafka_conformance: error:") and fragment in err[0]


def test_arguments_default_to_kafka_4_0_and_two_at_a_time():
    a = conf.parse_args(["--mirror", "/"])
    assert a.versions == ["4.0"] and a.parallel == 2 and a.tests is None
    assert conf.parse_args(["--mirror", "/", "--tests", "0103, 0001"]).tests == ["0103", "0001"]


ABORTED = """\
================= Running test 0045_subscribe_update =================
[0045_subscribe_update       / 15.298s] ================= Test 0045_subscribe_update PASSED =================
[0045_resubscribe_with_regex /  0.000s] ================= Running test 0045_resubscribe_with_regex =================
[0045_subscribe_many_updates /  0.000s] ================= Running test 0045_subscribe_many_updates =================
### Test "0045_resubscribe_with_regex (do_test:704: Resubscribe)" failed at test.c:5482:f() at Thu Nov 26 2026: ###
Test assertion failed: DeleteTopics_result_topics returned NULL
test-runner: test.c:7702: test_fail0: Assertion `0' failed.
"""


def test_an_aborted_runner_is_read_from_its_progress_lines():
    results = conf.results_of(ABORTED + "\n### eoslab: test-runner exit code -6\n", "0045")
    assert results == {
        "0045_subscribe_update": {"result": "pass", "reason": ""},
        "0045_resubscribe_with_regex": {"result": "fail",
                                        "reason": "Test assertion failed: DeleteTopics_result_topics returned NULL"},
        "0045_subscribe_many_updates": {"result": "fail",
                                        "reason": "the runner ended before the test did (test-runner exit code -6)"},
    }


def test_a_killed_runner_fails_what_had_not_passed_with_the_timeout_first():
    results = conf.results_of(ABORTED + "\n### eoslab: test-runner killed after 240s\n", "0045")
    assert results["0045_subscribe_update"]["result"] == "pass"
    assert results["0045_subscribe_many_updates"]["reason"] == "timeout after 240s; the runner ended before the test did"
    assert conf.results_of("nothing\n### eoslab: test-runner killed after 9s\n", "0050") == {
        "0050": {"result": "fail", "reason": "timeout after 9s"}}


def test_a_runner_that_printed_nothing_fails_with_its_exit_code():
    assert conf.results_of("Git version: x\n### eoslab: test-runner exit code 134\n", "0050") == {
        "0050": {"result": "fail", "reason": "test-runner exit code 134, no summary"}}


def test_scenario_requirements_are_read_and_explain_a_silent_skip(tmp_path):
    text = TEST_C.replace("_TEST(0103_transactions, 0,", '_TEST(0103_transactions, 0, .scenario = "noautocreate",')
    assert conf.scenarios(text) == {"0103_transactions": "noautocreate"}
    (tmp_path / "0103-transactions.c").write_text("/**\n * @name Producer transaction tests\n */\n")
    per_number = {"0103": {"0103_transactions": {"result": "skip", "reason": ""}}, "0001": None}
    rows = conf.rows_of(["0103", "0001", "0097"], {"0103": ["0103_transactions"], "0001": ["0001_multiobj"],
                                                   "0097": ["0097_ssl_verify"]},
                        per_number, str(tmp_path), conf.scenarios(text))
    assert [(r["test"], r["result"]) for r in rows] == [
        ("0103_transactions", "skip"), ("0001_multiobj", "not run"), ("0097_ssl_verify", "excluded")]
    assert rows[0]["reason"].startswith("requires test scenario noautocreate")
    assert rows[0]["what"] == "Producer transaction tests"
    assert rows[1]["what"] == ""


def test_a_scenario_test_takes_its_result_from_its_own_pass(tmp_path):
    text = TEST_C.replace("_TEST(0103_transactions, 0,", '_TEST(0103_transactions, 0, .scenario = "noautocreate",')
    default = {"0103": {"0103_transactions": {"result": "skip", "reason": ""}}, "0001": {
        "0001_multiobj": {"result": "pass", "reason": ""}}}
    per_scenario = {"default": default,
                    "noautocreate": {"0103": {"0103_transactions": {"result": "pass", "reason": ""}}}}
    names = {"0103": ["0103_transactions"], "0001": ["0001_multiobj"]}
    rows = conf.rows_of(["0103", "0001"], names, default, str(tmp_path), conf.scenarios(text), per_scenario)
    assert [(r["test"], r["result"], r["reason"]) for r in rows] == [
        ("0103_transactions", "pass", "in the noautocreate scenario"), ("0001_multiobj", "pass", "")]
    per_scenario["noautocreate"] = {"0103": {"0103_transactions": {"result": "fail", "reason": "boom"}}}
    rows = conf.rows_of(["0103"], names, default, str(tmp_path), conf.scenarios(text), per_scenario)
    assert (rows[0]["result"], rows[0]["reason"]) == ("fail", "boom")


def test_scenario_files_give_the_brokers_their_flags(tmp_path):
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "noautocreate.json").write_text(
        '{\n    "auto_create_topics": "false",\n    "num_partitions": 4,\n    "replication_factor": 3,\n}\n')
    assert conf.scenario_broker_args(str(tmp_path), "noautocreate") == [
        "--num-partitions=4", "--auto-create-topics-enable=false"]
    assert conf.scenario_broker_args(str(tmp_path), "default") == ["--num-partitions=1"]


def test_a_build_made_before_rapidjson_is_not_reused(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test-runner").write_text("")
    (tmp_path / ".eoslab-built").write_text("abc\n")
    assert not conf.reusable(str(tmp_path), "abc")
    (tmp_path / ".eoslab-built").write_text(f"abc {conf.BUILT}\n")
    assert conf.reusable(str(tmp_path), "abc")
    assert not conf.reusable(str(tmp_path), "def")
    assert ("/usr/include/rapidjson/schema.h", "rapidjson-dev") in conf.BUILD_DEPS


def test_a_test_with_long_scripted_waits_gets_its_own_bound_which_only_lengthens():
    assert conf.bound("0113", 240) == conf.TIMEOUTS["0113"] >= 855 + 240
    assert conf.bound("0113", 3000) == 3000
    assert conf.bound("0001", 240) == 240


def test_a_scenario_pass_runs_only_numbers_with_a_test_of_that_scenario_left_to_run(tmp_path):
    names = {"0045": ["0045_subscribe_update", "0045_subscribe_update_topic_remove"],
             "0107": ["0107_topic_recreate"], "0001": ["0001_multiobj"]}
    scen = {"0045_subscribe_update_topic_remove": "noautocreate", "0107_topic_recreate": "noautocreate",
            "0001_multiobj": "default,ak23"}
    # every release runs it in its own scenario's pass (before 3.0 librdkafka calls the topics tool with
    # --zookeeper, which the stand-in speaks too)
    for release in ("2.5", "4.0"):
        passes = conf.scenario_passes(["0001", "0045", "0107"], names, scen, release)
        assert passes == {"default": ["0001", "0045", "0107"], "noautocreate": ["0045", "0107"]}
    rows = conf.rows_of(["0045"], names, {"0045": {"0045_subscribe_update": {"result": "pass", "reason": ""}}},
                        str(tmp_path), scen, {"default": {}, "noautocreate": {}}, "2.5")
    assert [r["test"] for r in rows] == ["0045_subscribe_update", "0045_subscribe_update_topic_remove"]
    assert rows[1]["result"] != "excluded"
    # 0052's 0.9.0.0 rounds (message format v0) run before 4.0: the brokers take and serve the old formats
    assert "0052" not in conf.excluded("2.5") and "0052" not in conf.excluded("3.6")


def test_the_kafka_path_runs_the_lab_stand_ins_and_they_refuse_in_one_line(tmp_path):
    import subprocess
    root = conf.kafka_path(str(tmp_path))
    for tool in ("kafka-topics.sh", "kafka-acls.sh"):
        assert os.access(os.path.join(root, "bin", tool), os.X_OK)
    # --bootstrap-server or --zookeeper, one of them: refused before any connection, in one line
    r = subprocess.run([os.path.join(root, "bin", "kafka-topics.sh"), "--zookeeper", "z:2181", "--bootstrap-server",
                        "b:9092", "--create", "--topic", "t"], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr.strip()) == (1, "Error: exactly one of --bootstrap-server and --zookeeper is "
                                                 "required")
    r = subprocess.run([os.path.join(root, "bin", "kafka-acls.sh"), "--bootstrap-server", "127.0.0.1:1", "--add",
                        "--operation", "Fly", "--deny-principal", "User:*", "--topic", "t"],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr.strip()) == (1, "Error: unknown operation Fly; one of " +
                                                 ", ".join(__import__("tools.kafka_tools").kafka_tools.OPERATIONS))


def test_brokers_get_racks_and_the_rack_aware_selector_from_2_4_as_trivup_gives_them(tmp_path):
    on_4 = conf.broker_args(str(tmp_path), "default", "4.0")
    assert "--broker-rack=RACK{id}" in on_4 and any(a.endswith("RackAwareReplicaSelector") for a in on_4)
    assert on_4[0] == "--num-partitions=1" and set(conf.AUTHORIZER_ARGS) <= set(on_4)
    on_2_3 = conf.broker_args(str(tmp_path), "default", "2.3")
    assert not [a for a in on_2_3 if "rack" in a.lower() or "selector" in a]
