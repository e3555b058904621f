"""The Kafka generation table: every release known, the docs' table generated from the code."""
import os

import pytest

from eoslab import kafka_version as kv

pytestmark = pytest.mark.fast
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_releases_and_their_defining_rules():
    assert kv.names() == ["0.11", "2.5", "3.0", "3.6", "4.0"] and kv.DEFAULT == "4.0"
    assert kv.get("0.11").on_out_of_order == "fatal" and kv.get("2.5").on_out_of_order == "bump-epoch"   # KIP-360
    assert not kv.get("2.5").enable_idempotence_default and kv.get("3.0").enable_idempotence_default    # KIP-679
    assert not kv.get("3.0").transaction_verification and kv.get("3.6").transaction_verification       # KIP-890.1
    assert not kv.get("3.6").epoch_bump_per_transaction and kv.get("4.0").epoch_bump_per_transaction   # KIP-890.2
    assert kv.get(None) is kv.get("4.0")
    with pytest.raises(ValueError, match="known: 0.11, 2.5"):
        kv.get("3.9")


def test_every_behaviour_has_a_source_and_the_docs_table_is_current():
    assert set(kv.BEHAVIOURS) == set(kv.get("4.0").as_dict()) - {"name"}
    with open(os.path.join(REPO, "docs", "kafka-versions.md"), encoding="utf-8") as f:
        doc = f.read()
    assert kv.markdown_table() in doc, "docs/kafka-versions.md: regenerate the table from eoslab.kafka_version"
