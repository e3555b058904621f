"""The `eoslab` command line: one dispatcher, each command registered by its package.

Guarantees: bad arguments or an unreachable cluster give one readable line on
stderr and a non-zero exit, never a traceback (set EOSLAB_DEBUG=1 to see one).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

# command module -> the package that owns it; each module has register(subparsers)
COMMAND_MODULES = [
    "cluster.cli",
    "cluster.shrink_cli",
    "cluster.apps.cli",
    "clients.cli",
    "checker.cli",
    "cluster.scenarios.cli",
    "pipeline.cli",
]


class CliError(Exception):
    """A user-facing error: printed as one line, exit code `code`."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, like argparse but shorter
        self.exit(2, f"eoslab: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="eoslab", description="eoslab: Kafka exactly-once lab")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name and name.startswith(e.name):
                continue  # a package this installation leaves out (the service image has no pipeline/)
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except CliError as e:
        print(f"eoslab: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        print("eoslab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # never a traceback for users
        if os.environ.get("EOSLAB_DEBUG"):
            raise
        print(f"eoslab: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return rc or 0


if __name__ == "__main__":
    sys.exit(main())
