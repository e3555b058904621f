"""The README and docs/ stay true to the tree: links resolve, named files exist.

Guarantees: every relative link in README.md and docs/*.md points at a file
or directory of the checkout, and a `#fragment` at a heading of the target
page; every repository path written in backquotes (`services/broker/log.py`,
`clients/`) exists; the README stays short (at most 300 lines); the pytest
markers the README's Testing section lists are exactly pyproject's; the make
targets the README names exist.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP_DIRS = ("services/", "clients/", "eoslab/", "cluster/", "checker/", "pipeline/", "bench/",
            "tests/", "proto/", "tools/", "docker/", "k8s/", "docs/", "mk/", ".ci/")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")


def _prose(text: str) -> str:
    """The page without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    s = re.sub(r"[`*_]", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*)$", _prose(page.read_text()), re.M)}


def _links():
    for page in PAGES:
        for m in LINK.finditer(_prose(page.read_text())):
            target = m.group(1) or m.group(2)
            if re.match(r"[a-z]+:", target):      # http:, https:, mailto:
                continue
            yield page, target


@pytest.mark.parametrize("page,target", list(_links()), ids=lambda v: v.name if isinstance(v, Path) else v)
def test_relative_link_resolves(page, target):
    path, _, fragment = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    assert dest.exists(), f"{page.relative_to(ROOT)}: link to {target}: no such file"
    if fragment and dest.suffix == ".md":
        assert fragment in _anchors(dest), f"{page.relative_to(ROOT)}: link to {target}: no such heading"


def _repo_paths():
    for page in PAGES:
        for m in CODE_SPAN.finditer(_prose(page.read_text())):
            for word in m.group(1).split():
                word = word.rstrip(",.;:)").split("::")[0]
                if not word.startswith(TOP_DIRS) or re.search(r"[<>*$A-Z{:]|\.\.\.|…", word):
                    continue        # not a path of the tree: a placeholder, a glob, an image tag
                yield page, word


@pytest.mark.parametrize("page,path", sorted(set(_repo_paths())),
                         ids=lambda v: v.name if isinstance(v, Path) else v)
def test_named_path_exists(page, path):
    assert (ROOT / path).exists(), f"{page.relative_to(ROOT)} names `{path}`, which does not exist"


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 300, f"README.md has {lines} lines; longer material belongs in docs/"


def test_readme_markers_are_pyprojects():
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    names = {m.split(":")[0] for m in markers}
    testing = (ROOT / "README.md").read_text().split("## Testing", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(\w+)` \|", testing, re.M))
    assert listed == names


def test_readme_make_targets_exist():
    makefiles = (ROOT / "Makefile").read_text() + "".join(p.read_text() for p in (ROOT / "mk").glob("*.mk"))
    targets = set(re.findall(r"^([\w-]+):", makefiles, re.M))
    named = set(re.findall(r"`make ([\w-]+)", (ROOT / "README.md").read_text()))
    named |= set(re.findall(r"^make ([\w-]+)", (ROOT / "README.md").read_text(), re.M))
    assert named and named <= targets, f"README names make targets that do not exist: {named - targets}"
