"""What the app does differently when `lineage serve` runs it for a browser.

The server (lineage/cli/serve.py) starts the app with LINEAGE_SERVE_ROOT set. Then the app must not
be a file reader for whoever drives it: Open accepts only the bundled scenarios and regular
files under the root, refusing anything else by name without reading it, and error dialogs
give a problem's place but never the file's content (a YAML file of credentials would
otherwise show its first value in the dialog). What a scenario under the root may name is
confined too, before anything is read: lineage/scenario/served_paths.py, whose refusals the
dialog shows whole.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from lineage.files import kind_of
from lineage.scenarios import DIR as SCENARIO_DIR

ROOT_ENV = "LINEAGE_SERVE_ROOT"          # lineage/scenario/served_paths.py reads it too (confining what a scenario names)
MAX_SESSIONS = 4         # app processes at once: about 1.4 GB of playing apps, a laptop's share


def served_root() -> Path | None:
    root = os.environ.get(ROOT_ENV)
    return Path(root).resolve() if root else None


def refusal(path: str, root: Path | None = None) -> str | None:
    """Why the served app (root: the served root, by default from the environment) must not
    open `path`, or None when it may (or when not served)."""
    root = root or served_root()
    if root is None:
        return None
    from .opening import ORIGIN
    if path in ORIGIN:                 # made by this process (the `i` key) from what it was let open
        return None
    p = Path(path).resolve()           # symlinks followed: a link under the root to /etc is outside
    if not (p.is_relative_to(root) or p.is_relative_to(SCENARIO_DIR.resolve())):
        return f"{path}: outside {root}; the served app opens only the bundled scenarios and files under it"
    try:
        mode = os.stat(p).st_mode      # stat never blocks, even on a FIFO
    except OSError as e:
        return f"{path}: cannot open: {e.strerror or e}"
    if not stat.S_ISREG(mode):
        return f"{path}: {kind_of(mode)}, not a regular file: refused without reading"
    return None


def shown_problems(lines: list[str], path: str) -> list[str]:
    """The error lines as the dialog may show them: unchanged in a terminal; served, only where
    each problem is (the text after FILE:LINE:COL may quote the file)."""
    if served_root() is None:
        return lines
    from lineage.scenario.served_paths import REFUSED     # the app has loaded lineage.scenario already
    out = []
    for line in lines:
        head, sep, _ = line.partition(": ")
        if sep and head.startswith(path) and line.endswith(REFUSED):
            out.append(line)            # a field's name and the rule, nothing of the file's values
        else:
            out.append(f"{head}: a problem here" if sep and head.startswith(path) else f"{path}: could not be opened")
    if all(line.endswith(REFUSED) for line in out):
        return out
    return out + ["(details are not shown in the served app: run `lineage validate FILE` in a terminal)"]
