"""The service settings of docker-compose.yml and k8s/*.yaml, from the services' typed configs.

Usage: python tools/gen_deploy.py [--check]   (--check: exit 1 when a file is stale, naming it)

Guarantees: only the lines between a `# BEGIN generated: NAME ...` comment and
its `# END generated: NAME` are rewritten, from cluster/deploy_settings.py's
spec rendered through services/*/config.py: in compose a container's
`command:` or a role's shared environment anchor, in Kubernetes the service
container's `args:`. Everything else (images, networks, healthchecks,
sidecars, volumes, comments) is left byte for byte. Every block the spec
names must be marked exactly once in its file and every marked block must be
in the spec; a bad spec (unknown setting, value out of range) or a missing,
doubled or unknown marker stops with one line and exit status 2, writing
nothing. Running it twice changes nothing the second time.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from cluster import deploy_settings as ds  # noqa: E402

BEGIN = re.compile(r"^(?P<indent>[ ]*)# BEGIN generated: (?P<block>\S+)")
END = re.compile(r"^[ ]*# END generated: (?P<block>\S+)\s*$")
WIDTH = 118          # compose lines; the k8s args fold near it too


def begin_line(indent: str, r: ds.Rendered) -> str:
    return f"{indent}# BEGIN generated: {r.block} (tools/gen_deploy.py, from {ds.CONFIG_FILES[r.role]})\n"


def yaml_str(s: str) -> str:
    return s if re.fullmatch(r"--?[a-z][a-z0-9-]*|[a-z][a-z0-9-]*", s) else json.dumps(s)


def compose_lines(indent: str, r: ds.Rendered) -> list[str]:
    """A compose container's `command: [...]` (flow style, wrapped before a flag), or a shared environment
    anchor's `EOSLAB_<NAME>: "value"` lines."""
    if not r.words:
        return [f"{indent}{name}: {json.dumps(value)}\n" for name, value in r.env]
    return fold([r.role] + [", ".join(yaml_str(w) for w in g) for g in r.flags],
                f"{indent}command: [", ",", "]")


def fold(groups: list[str], head: str, sep: str, tail: str = "") -> list[str]:
    """`head` + the groups, each but the last followed by `sep`, the last by `tail`; lines are broken between
    groups before WIDTH, continuation lines aligned under the first group."""
    pieces = [g + sep for g in groups[:-1]] + [groups[-1] + tail]
    lines, line, empty = [], head, True
    for piece in pieces:
        if not empty and len(line) + 1 + len(piece) > WIDTH:
            lines.append(line + "\n")
            line, empty = " " * len(head), True
        line += ("" if empty else " ") + piece
        empty = False
    return lines + [line + "\n"]


def k8s_lines(indent: str, r: ds.Rendered) -> list[str]:
    """The service container's `args:`: one shell line `exec eoslab-entrypoint ROLE FLAGS...`, folded (`>-`)
    before a flag; the folding joins the lines back with single spaces. Values are shell-quoted unless the
    spec wrote them for the shell to expand."""
    if r.env:
        raise ds.SpecError(f"{r.file} {r.block}: a Kubernetes block holds the args only, not {r.env[0][0]}")
    groups = [f"exec eoslab-entrypoint {r.role}"] + [
        " ".join(w if i == 0 or w in r.expand else shlex.quote(w) for i, w in enumerate(g)) for g in r.flags]
    body = indent + "    "
    return [f"{indent}args:\n", f"{indent}  - >-\n"] + fold(groups, body, "")


def rewrite(path: str, text: str, blocks: dict[str, ds.Rendered]) -> str:
    """`text` of the file `path` with each marked block rendered anew; SpecError for a bad or missing marker."""
    out, lines, seen, i = [], text.splitlines(keepends=True), set(), 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        if END.match(lines[i]):
            raise ds.SpecError(f"{path}:{i + 1}: '# END generated' without its BEGIN")
        if not m:
            out.append(lines[i])
            i += 1
            continue
        block, indent = m["block"], m["indent"]
        if block not in blocks:
            raise ds.SpecError(f"{path}:{i + 1}: block {block!r} is not in cluster/deploy_settings.py's spec")
        if block in seen:
            raise ds.SpecError(f"{path}:{i + 1}: block {block!r} is marked twice")
        seen.add(block)
        j = i + 1
        while j < len(lines) and not END.match(lines[j]):
            if BEGIN.match(lines[j]):
                raise ds.SpecError(f"{path}:{j + 1}: BEGIN inside block {block!r}")
            j += 1
        if j == len(lines) or END.match(lines[j])["block"] != block:
            raise ds.SpecError(f"{path}:{i + 1}: block {block!r} has no '# END generated: {block}'")
        r = blocks[block]
        body = compose_lines(indent, r) if path == ds.COMPOSE_FILE else k8s_lines(indent, r)
        out += [begin_line(indent, r)] + body + [f"{indent}# END generated: {block}\n"]
        i = j + 1
    missing = sorted(set(blocks) - seen)
    if missing:
        raise ds.SpecError(f"{path}: no '# BEGIN generated: {missing[0]}' block (mark where it goes)")
    return "".join(out)


def generate(root: str = REPO) -> dict[str, tuple[str, str]]:
    """path -> (current text, generated text) for every file the spec names."""
    by_file: dict[str, dict[str, ds.Rendered]] = {}
    for r in ds.render():
        by_file.setdefault(r.file, {})[r.block] = r
    out = {}
    for path, blocks in by_file.items():
        with open(os.path.join(root, path)) as f:
            text = f.read()
        out[path] = (text, rewrite(path, text, blocks))
    return out


def stale(root: str = REPO) -> list[str]:
    return sorted(p for p, (old, new) in generate(root).items() if old != new)


def write(root: str = REPO) -> list[str]:
    changed = []
    for path, (old, new) in generate(root).items():
        if old != new:
            with open(os.path.join(root, path), "w") as f:
                f.write(new)
            changed.append(path)
    return sorted(changed)


def main(argv: list[str]) -> int:
    try:
        if "--check" in argv:
            late = stale()
            if late:
                print(f"{', '.join(late)}: stale, run python tools/gen_deploy.py", file=sys.stderr)
                return 1
            return 0
        for path in write():
            print(f"wrote {path}")
        return 0
    except ds.SpecError as e:
        print(f"gen_deploy: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
