"""How a librdkafka test-runner's output reads as per-test results, and the results table.

Guarantees: every test the output names gets one result (pass, fail or skip) with the runner's first
failure or skip line; a runner killed at its bound fails what had not passed, with the timeout first;
a runner that printed no test fails under its number with its exit code; table cells never break the
Markdown table (pipes escaped, one line each).
"""
from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SUMMARY = re.compile(r"^\|\s*(\d{4}_\w+)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING|DNS)\s*\|\s*[\d.]+s\s*\|\s*(.*?)\s*$")
FAILHDR = re.compile(r'^### Test "(\d{4}_\w+)(?: \(.*\))?" failed at .*###$')
PASSLINE = re.compile(r"=+ Test (\d{4}_\w+) PASSED =+")
STARTLINE = re.compile(r"=+ Running test (\d{4}_\w+) =+")
ENDED = "the runner ended before the test did"
STATE = {"PASSED": "pass", "FAILED": "fail", "SKIPPED": "skip", "RUNNING": "fail", "DNS": "skip"}


def parse_output(text: str) -> dict[str, dict]:
    """Per test name: result and first failure/skip line, from a test-runner's output."""
    text = ANSI.sub("", text)
    results: dict[str, dict] = {}
    first_failure: dict[str, str] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = FAILHDR.match(line.strip())
        if m and m.group(1) not in first_failure and i + 1 < len(lines):
            first_failure[m.group(1)] = lines[i + 1].strip()
    for line in lines:
        m = SUMMARY.match(line.strip())
        if m:
            name, state, reason = m.groups()
            reason = "" if state == "PASSED" else "still running when the runner ended" if state == "RUNNING" else reason
            results[name] = {"result": STATE[state], "reason": reason or first_failure.get(name, "")}
    # no summary (the runner aborted or was killed): what its progress lines tell
    for name in PASSLINE.findall(text):
        results.setdefault(name, {"result": "pass", "reason": ""})
    for name, reason in first_failure.items():
        results.setdefault(name, {"result": "fail", "reason": reason})
    for name in STARTLINE.findall(text):
        results.setdefault(name, {"result": "fail", "reason": ENDED})
    return results


KILLED = re.compile(r"^### eoslab: test-runner killed after (\d+)s$", re.M)
EXITED = re.compile(r"^### eoslab: test-runner exit code (-?\d+)$", re.M)


def results_of(text: str, number: str) -> dict[str, dict]:
    """Per-test results of one test-runner log, including the end marker run_number appends."""
    results = parse_output(text)
    killed, exited = KILLED.search(text), EXITED.search(text)
    for r in results.values():
        if killed and r["result"] != "pass":
            r["result"], r["reason"] = "fail", "; ".join(filter(None, [f"timeout after {killed.group(1)}s", r["reason"]]))
        elif exited and r["reason"] == ENDED:
            r["reason"] += f" (test-runner exit code {exited.group(1)})"
    if not results:
        code = exited.group(1) if exited else "unknown"
        why = f"timeout after {killed.group(1)}s" if killed else f"test-runner exit code {code}, no summary"
        results[number] = {"result": "fail", "reason": why}
    return results


def markdown(rows) -> str:
    out = ["| test | exercises | result | first failure / skip reason |", "|---|---|---|---|"]
    for r in rows:
        cells = [r["test"], r["what"], r["result"], r["reason"]]
        out.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(out) + "\n"
