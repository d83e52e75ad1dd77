"""The one did-you-mean hint for a mistyped name (presets, scenario keys, kinds)."""
from __future__ import annotations

import difflib


def did_you_mean(word, choices) -> str:
    """' (did you mean 'k3-mini'?)' for the closest choice, or '' when none is close."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
