"""Layers point one way: clients/ and eoslab/ (the common module both sides use) import nothing from
services/ or cluster/, as Kafka's clients jar knows nothing of the broker."""
import ast
import os

import pytest

pytestmark = pytest.mark.fast
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def imports_of(package: str):
    for root, _, files in os.walk(os.path.join(REPO, package)):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(root, name)
            tree = ast.parse(open(path, encoding="utf-8").read(), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    yield os.path.relpath(path, REPO), node.module
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        yield os.path.relpath(path, REPO), a.name


@pytest.mark.parametrize("package", ["clients", "eoslab/common"])
def test_the_client_side_imports_nothing_of_the_services(package):
    bad = [(p, m) for p, m in imports_of(package) if m.split(".")[0] in ("services", "cluster")]
    assert not bad, bad
