"""Files replaced whole: a reader sees the old content or the new, never a torn or empty file.

Guarantees: `replace_text(path, text)` writes `text` to a temporary file in the same directory and
renames it over `path` (atomic on one filesystem); if anything fails before the rename, `path` is
untouched and the temporary file is removed. `replace_json(path, obj, **dumps)` serializes first,
so an object that cannot be written leaves the old file as it was.
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any


def replace_text(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def replace_json(path: str, obj: Any, **dumps: Any) -> None:
    replace_text(path, json.dumps(obj, **dumps) + "\n")
