"""What librdkafka's test tree says about its tests: the test table in tests/test.c (names and flags),
the scenario a test requires, its description from its source file's header comment, and the
`default` scenario's num.partitions. Reading only: nothing here runs a test.
"""
from __future__ import annotations

import os
import re


def _body(test_c: str) -> str:
    body = test_c[test_c.index("struct test tests[] = {"):]
    return body[:body.index("\n};")]


def test_table(test_c: str) -> list[tuple[str, str]]:
    """(name, flags) of every entry of test.c's tests[] table."""
    body = _body(test_c)
    return [(m.group(1), m.group(2).strip()) for m in re.finditer(r"_TEST\((\w+),\s*([^,)]+)", body)]


def scenarios(test_c: str) -> dict[str, str]:
    """Test name -> the scenario it requires, for tests that name one."""
    out = {}
    for chunk in _body(test_c).split("_TEST(")[1:]:
        m = re.search(r'\.scenario\s*=\s*"([^"]+)"', chunk)
        if m:
            out[chunk.split(",")[0].strip()] = m.group(1)
    return out


COMMENT = re.compile(r"^/\*+(.*?)\*/", re.S | re.M)
CODE = re.compile(r"^(static|class|int|void|#define|struct|typedef|extern|using|enum)\b", re.M)


def _sentence(block: str, limit: int) -> str:
    lines = [re.sub(r"^\s*\*?\s?", "", ln).strip() for ln in block.splitlines()]
    lines = [re.sub(r"^@(name|brief)\s*", "", ln) for ln in lines if ln]
    words = " ".join(ln for ln in lines if not ln.startswith("@")).strip()
    words = re.split(r"(?<=\.)\s|\s-\s", words)[0].rstrip(".").strip()
    words = re.sub(r"\b[Ii]ssue #(\d+)", r"librdkafka#\1", words)     # the tracker the test cites
    return words if len(words) <= limit else words[:limit - 1] + "…"


def header_comment(text: str, limit: int = 100, main: str = "") -> str:
    """What a test file says it tests: its header comment (one before any code), else the comment
    right above its main function, else ""."""
    code = CODE.search(text)
    for m in COMMENT.finditer(text, 0, code.start() if code else len(text)):
        if not ("Copyright" in m.group(1) or "Typical include" in m.group(1) or len(m.group(1).split()) < 3):
            return _sentence(m.group(1), limit)
    m = main and re.search(r"/\*+((?:(?!\*/).)*?)\*/\s*(?:extern \"C\" )?int\s+" + re.escape(main), text, re.S)
    return _sentence(m.group(1), limit) if m else ""


def describe(tests_dir: str, number: str) -> str:
    for name in sorted(os.listdir(tests_dir)):
        if name.startswith(number + "-") and name.endswith((".c", ".cpp")):
            text = open(os.path.join(tests_dir, name), errors="replace").read()
            main = re.search(r"\bmain_" + number + r"\w*", text)
            stem = name.split("-", 1)[1].rsplit(".", 1)[0].replace("_", " ").replace("-", " ")
            return header_comment(text, main=main.group(0) if main else "") or f"({stem}; no header comment)"
    return ""


def scenario_broker_args(tests_dir: str, scenario: str = "default") -> list[str]:
    """Broker flags for one of librdkafka's test scenarios (tests/scenarios/<name>.json, which is not
    strict JSON): `num_partitions` (the partitions its tests expect an auto-created topic to have;
    Kafka's default 1 when the file does not say) and `auto_create_topics`."""
    try:
        with open(os.path.join(tests_dir, "scenarios", f"{scenario}.json")) as f:
            text = f.read()
    except OSError:
        text = ""
    parts = re.search(r'"num_partitions"\s*:\s*(\d+)', text)
    args = [f"--num-partitions={int(parts.group(1)) if parts else 1}"]
    auto = re.search(r'"auto_create_topics"\s*:\s*"?(true|false)"?', text)
    if auto:
        args.append(f"--auto-create-topics-enable={auto.group(1)}")
    return args
