"""Every fact written so far, read back with its own key: what the memory still recalls."""
from __future__ import annotations

import numpy as np

from .base import TextPanel
from .common import model_name


def text_form(cur, i: int, p: dict, width: int) -> list[str]:
    f, info = cur.frame(i), cur.info
    lines = ["recall: every fact written so far, read back with its own key"]
    for m in range(len(info["models"])):
        r = f.recall(m)
        if r is None:
            continue
        keys, rec, tgt = r.keys, r.recall, r.target
        lines.append(f"  {model_name(info, m)}:")
        for key, r, t in zip(keys, rec, tgt):
            err = float(np.linalg.norm(r - t))
            if r.size <= 4:
                shown = " ".join(f"{x:.2f}" for x in r)
            else:  # wide values: name the strongest component and the one it should be
                shown = f"strongest v{int(np.argmax(r))} {r.max():.2f} (want v{int(np.argmax(t))})"
            lines.append(f"    k{int(key):<4} reads {shown:<34} error {err:.2f}")
    return lines


class RecallPanel(TextPanel):
    kind = "recall"
    text_form = staticmethod(text_form)
