"""Strings from files never reach a terminal raw.

A title, caption or key in a scenario or trace could carry terminal escape sequences (OSC 52
sets the clipboard, OSC 2 the window title) or other control characters. Scenarios refuse them
at load (a located problem); everything else read from a file (trace frames' text, error
messages that quote a file) shows them as visible escapes instead.
"""
from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls; plus the bidi overrides that reorder text
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def first_control(s: str) -> str | None:
    m = _CONTROL.search(s)
    return m.group() if m else None


def visible(s: str, keep_newlines: bool = True) -> str:
    """`s` with each control character written as an escape (\\x1b, \\u202e); one line unless
    keep_newlines."""
    out = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), s)
    return out if keep_newlines else out.replace("\n", "\\n").replace("\t", " ")


def visible_tree(x):
    """A JSON-like value with every string (keys included) made visible."""
    if isinstance(x, str):
        return visible(x)
    if isinstance(x, dict):
        return {visible(k) if isinstance(k, str) else k: visible_tree(v) for k, v in x.items()}
    if isinstance(x, list):
        return [visible_tree(v) for v in x]
    return x
