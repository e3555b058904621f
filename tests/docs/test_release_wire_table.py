"""docs/kafka-versions.md's per-release wire table says what the Kafka listeners really advertise."""
import os
import re

import pytest

from services.kafka_protocol import broker_apis, coordinator_apis, group_apis
from services.kafka_protocol.apis import API_VERSIONS, ApiHandlers

pytestmark = pytest.mark.fast
DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "kafka-versions.md")
RELEASES = ["0.11", "2.5", "3.0", "3.6", "4.0"]


def advertised(release):
    h = ApiHandlers()
    for key, (lo, hi) in {**broker_apis.VERSIONS, **group_apis.VERSIONS, **coordinator_apis.VERSIONS,
                          API_VERSIONS: (0, 4)}.items():
        h.register(key, lo, hi, None)
    h.limit_to_release(release)
    return h.served


def cell(r) -> str:
    return "not served" if r is None else (f"{r[0]}" if r[0] == r[1] else f"{r[0]}-{r[1]}")


def test_every_row_of_the_wire_table_is_what_the_listeners_advertise():
    text = open(DOC).read()
    section = text[text.index("## What each release speaks on the wire"):text.index("## Rules that hold")]
    rows = [line for line in section.splitlines() if re.match(r"\| [A-Z].*\(\d", line)]
    assert len(rows) >= 10
    served = {r: advertised(r) for r in RELEASES}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        keys = [int(k) for k in re.findall(r"\d+", re.search(r"\(([\d, -]+)\)", cells[0]).group(1))]
        keys = list(range(keys[0], keys[1] + 1)) if len(keys) == 2 and "-" in cells[0] else keys
        for key in keys:
            assert cells[1:] == [cell(served[r].get(key)) for r in RELEASES], (row, key)
