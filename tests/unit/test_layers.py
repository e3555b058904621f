"""Layers point one way.

- clients/ and eoslab/common (the common module both sides use) import nothing from services/ or
  cluster/, as Kafka's clients jar knows nothing of the broker.
- checker/ judges recorded histories: it imports nothing of cluster/, services/ or clients/, neither
  in its own source nor through the repo modules it imports (eoslab/, say), followed all the way.
- services/ imports clients/ only where the transaction coordinator needs a client of the brokers
  (Kafka's coordinator runs inside the broker; this one is a process of its own): exactly the
  imports listed in COORDINATOR_CLIENT_IMPORTS, so a new one fails here until it is listed, with
  its reason, and a listed one that is gone fails too (the list stays exact).

Imports are read from the source: `import x`, `from x import y` (relative ones resolved) and
`importlib.import_module("x")` / `__import__("x")` with a literal name.
"""
import ast
import functools
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.fast
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCANNED = ("checker", "clients", "cluster", "eoslab", "pipeline", "services")

# services/ -> clients/, each (file, module, name) with why the coordinator needs it
COORDINATOR_CLIENT_IMPORTS = {
    # the coordinator's producer: appends its fences and transaction transitions to __transaction_state
    ("services/txn_coordinator/transaction_state_manager.py", "clients.producer", "KafkaProducer"),
    ("services/txn_coordinator/transaction_state_manager.py", "clients.producer", "ProducerConfig"),
    # beyond the producer, the same process's other broker-client uses:
    # reads its __transaction_state partitions back when it gains them, and checks them for a newer fence
    ("services/txn_coordinator/transaction_state_manager.py", "clients.consumer", "KafkaConsumer"),
    # finds the leaders of __transaction_state
    ("services/txn_coordinator/transaction_state_manager.py", "clients.metadata", "ClusterMetadata"),
    # finds the leaders to send WriteTxnMarkers to
    ("services/txn_coordinator/transaction_marker_channel_manager.py", "clients.metadata", "ClusterMetadata"),
    # creates __transaction_state when it does not exist yet
    ("services/txn_coordinator/server.py", "clients.admin", "create_topic"),
}


def imports(package: str):
    """(file relative to the repo, module, imported name or None, line) for every import in a
    package's source."""
    for root, _, files in os.walk(os.path.join(REPO, package)):
        for name in sorted(files):
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(root, name), REPO)
                for module, imported, line in imports_in_file(rel):
                    yield rel, module, imported, line


def parse_imports(rel: str) -> list:
    """(module, imported name or None, line) for every import in one file of the repo."""
    path = os.path.join(REPO, rel)
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module
            if node.level:         # relative: from the file's package, up level - 1
                base = os.path.dirname(rel).split(os.sep)
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            out += [(module, a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if fn in ("import_module", "__import__"):
                out.append((node.args[0].value, None, node.lineno))
    return out


def scan() -> dict[str, list]:
    """Every .py file of the repo's packages -> its imports."""
    table = {}
    for package in SCANNED:
        for root, _, files in os.walk(os.path.join(REPO, package)):
            for name in files:
                if name.endswith(".py"):
                    rel = os.path.relpath(os.path.join(root, name), REPO)
                    table[rel] = parse_imports(rel)
    return table


@functools.cache
def _table() -> dict[str, tuple]:
    """scan(), run in a fresh interpreter: CPython 3.11's AST constructor keeps one recursion counter
    per interpreter, so an ast.parse here racing another thread's (a leftover thread of an earlier
    test in this worker formatting a traceback parses source too) fails with "SystemError: AST
    constructor recursion depth mismatch"."""
    code = "import json; from tests.unit.test_layers import scan; print(json.dumps(scan()))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=REPO)).stdout
    return {rel: tuple(tuple(i) for i in imps) for rel, imps in json.loads(out).items()}


def imports_in_file(rel: str) -> tuple:
    """(module, imported name or None, line) for every import in one file of the repo."""
    table = _table()
    return table[rel] if rel in table else tuple(parse_imports(rel))


def imports_of(package: str):
    """(file, module) pairs, as before."""
    for rel, module, _, _ in imports(package):
        yield rel, module


def _top(module: str | None) -> str:
    return (module or "").split(".")[0]


@pytest.mark.parametrize("package", ["clients", "eoslab/common"])
def test_the_client_side_imports_nothing_of_the_services(package):
    bad = [(p, m) for p, m in imports_of(package) if _top(m) in ("services", "cluster")]
    assert not bad, bad


def test_the_checker_imports_nothing_of_the_cluster_the_services_or_the_clients():
    bad = [(f"{p}:{line}", m) for p, m, _, line in imports("checker")
           if _top(m) in ("cluster", "services", "clients")]
    assert not bad, bad


def _source_of(module: str) -> str | None:
    """The repo file of a module (or package), None if it is not the repo's."""
    base = os.path.join(REPO, *module.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return os.path.relpath(path, REPO)
    return None


def test_the_checker_reaches_nothing_of_the_cluster_the_services_or_the_clients():
    """Following the imports of the repo's own modules from checker/ (eoslab/ too, say): none
    leads to cluster/, services/ or clients/ (every import counts, function-level ones too)."""
    seen: dict[str, str] = {}          # repo file -> the file that imported it
    todo = []
    for root, _, files in os.walk(os.path.join(REPO, "checker")):
        todo += [os.path.relpath(os.path.join(root, n), REPO) for n in files if n.endswith(".py")]
    seen.update((f, "") for f in todo)
    bad = []
    while todo:
        rel = todo.pop()
        for module, name, _ in imports_in_file(rel):
            for m in (module, f"{module}.{name}" if name else None):
                if m is None:
                    continue
                if _top(m) in ("cluster", "services", "clients"):
                    chain, f = [m], rel
                    while f:
                        chain.append(f)
                        f = seen[f]
                    bad.append(" <- ".join(chain))
                    continue
                src = _source_of(m)
                if src is not None and src not in seen:
                    seen[src] = rel
                    todo.append(src)
    assert not bad, bad


def test_the_services_import_the_clients_only_where_the_coordinator_needs_a_client():
    found = {(p, m, name) for p, m, name, _ in imports("services") if _top(m) == "clients"}
    new = sorted(found - COORDINATOR_CLIENT_IMPORTS)
    assert not new, f"services/ imports clients/ where it did not: {new}; list them in " \
                    f"COORDINATOR_CLIENT_IMPORTS with their reason, or import from eoslab.common"
    gone = sorted(COORDINATOR_CLIENT_IMPORTS - found)
    assert not gone, f"no longer imported, take them off COORDINATOR_CLIENT_IMPORTS: {gone}"


def test_the_sources_are_parsed_in_a_fresh_interpreter(monkeypatch):
    """No ast.parse in this worker's interpreter (see _table): with it broken here, the import table
    still comes out whole."""
    def broken(*a, **k):
        raise SystemError("AST constructor recursion depth mismatch (before=1, after=2)")
    monkeypatch.setattr(ast, "parse", broken)
    _table.cache_clear()
    try:
        assert ("clients.producer", "KafkaProducer") in {(m, n) for m, n, _ in imports_in_file(
            "services/txn_coordinator/transaction_state_manager.py")}
    finally:
        _table.cache_clear()
