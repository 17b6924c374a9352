"""Checks on directories the package reads that may come from someone else (docs/bounds.md).

Run directories and boards are shared: copied from a colleague, unpacked from an archive attached
to a paper. Such a directory is data, so reading it must neither run code nor reach outside it nor
read without bound. A symlink inside it that points elsewhere (``metrics.csv -> ~/.ssh/id_rsa``,
a checkpoint file -> ``/dev/zero``) would make the package read, digest or publish a file the user
never named; a ``config.json`` of gigabytes would be parsed whole. Each check reads the file
system only and raises a one-line :class:`UsageError`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from offline_gitd.errors import UsageError

# A run's config.json is a few kB; anything this large is not one.
MAX_JSON_BYTES = 16 << 20


def refuse_escaping_links(directory: Path, what: str) -> None:
    """Refuse a symlink under ``directory`` whose target lies outside it (or is dangling), and
    anything under it that is not a regular file or directory (a FIFO would block a reader)."""
    root = directory.resolve()
    for parent, dirs, files in os.walk(directory, followlinks=False):
        for name in (*dirs, *files):
            path = Path(parent) / name
            if path.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(root) or not target.exists():
                    raise UsageError(
                        f"{what} {directory}: {path.relative_to(directory)} is a link to {os.readlink(path)}, "
                        "outside the directory; refusing to read it"
                    )
            elif not (path.is_dir() or path.is_file()):
                raise UsageError(
                    f"{what} {directory}: {path.relative_to(directory)} is not a regular file; refusing to read it"
                )


def read_json_file(path: Path, what: str) -> Any:
    """The JSON document in ``path``, refused in one line when larger than :data:`MAX_JSON_BYTES`
    or not valid JSON; ``FileNotFoundError`` passes through for the caller to word."""
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_JSON_BYTES:
            raise UsageError(f"{path}: {size} bytes is too large for a {what} (at most {MAX_JSON_BYTES})")
        data = f.read(MAX_JSON_BYTES + 1)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UsageError(f"{path} is not a valid {what} ({reason})") from None
