"""The C++ host path of ``kda_step`` (``step_launch.cpp``): built on first use, optional.

``LINEAGE_NATIVE`` chooses:

| value | what happens |
|---|---|
| ``auto`` (default) | the first ``kda_step`` on CUDA starts the build in a background thread (~20 s the first time on a 2-core box, then 0.2 - 0.3 s from torch's extension cache); calls take the Python launcher until it is ready |
| ``1`` | the build runs in the foreground at the first CUDA call, and a failure is an error |
| ``0`` | never: the Python launcher only |

The build is torch's own (``torch.utils.cpp_extension.load``: a C++ compiler and ninja); the
module needs no CUDA toolkit, only the driver that torch has loaded. Where it cannot be built
``kda_step`` keeps its Python launcher and ``status()`` says why.
"""
from __future__ import annotations

import os
import threading

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "step_launch.cpp")
_NAME = "lineage_step_launch"

_lock = threading.Lock()
_state = {"module": None, "status": "not built", "thread": None}


def mode() -> str:
    m = os.environ.get("LINEAGE_NATIVE", "auto").strip().lower()
    if m not in ("auto", "1", "0"):
        raise ValueError(f"LINEAGE_NATIVE must be auto, 1 or 0; got {m!r}")
    return m


def module():
    """The loaded extension, or None (not built yet, failed, or LINEAGE_NATIVE=0 now: the
    variable is read each time a plan is made, so a process can switch it between plans)."""
    return None if mode() == "0" else _state["module"]


def status() -> str:
    """'ready', 'building', 'off', 'not built' or 'failed: <reason>'."""
    return "off" if mode() == "0" else _state["status"]


def clear_plans() -> None:
    """Forget every plan the extension holds (whatever LINEAGE_NATIVE says now)."""
    if _state["module"] is not None:
        _state["module"].clear()


def _build() -> None:
    try:
        from torch.utils import cpp_extension
        mod = cpp_extension.load(name=_NAME, sources=[_SOURCE], extra_cflags=["-O2"], extra_ldflags=["-ldl"],
                                 verbose=os.environ.get("LINEAGE_NATIVE_VERBOSE") == "1")
    except Exception as e:  # noqa: BLE001 - no compiler, no ninja, headers: keep the Python path
        lines = str(e).strip().splitlines() or [type(e).__name__]
        # a compiler's own "error:" line says more than ninja's closing "build stopped"
        why = next((ln.strip() for ln in lines if "error:" in ln), lines[-1])
        _state["status"] = f"failed: {type(e).__name__}: {why[:200]}"
        return
    _state["module"] = mod
    _state["status"] = "ready"


def load(wait: bool = True):
    """Build (or take from torch's cache) and load the extension. ``wait=False`` starts the
    build in a daemon thread and returns at once. Returns the module or None."""
    if mode() == "0":
        return None
    with _lock:
        if _state["module"] is not None or _state["status"].startswith("failed"):
            return _state["module"]
        thread = _state["thread"]
        if thread is None:
            _state["status"] = "building"
            if not wait:
                thread = _state["thread"] = threading.Thread(target=_build, name="lineage-native-build", daemon=True)
                thread.start()
                return None
            _build()
            return _state["module"]
    if wait:
        thread.join()
    return _state["module"]


def start() -> None:
    """Called by ``kda_step`` at its first CUDA plan: begin the build as ``LINEAGE_NATIVE`` says."""
    m = mode()
    if m == "1":
        if load(wait=True) is None:
            raise RuntimeError(f"LINEAGE_NATIVE=1 but the C++ launcher is unavailable: {_state['status']}")
    elif m == "auto":
        load(wait=False)
