"""The suite's one conftest: where the Triton interpreter runs (and that it caches no traces).

Kernel tests on CPU tensors need TRITON_INTERPRET=1, which Triton reads once for the whole
process, and GPU tests need it unset. So a plain run leaves tests/kernels/interpreted/ out,
and tests/kernels/test_interpreter.py runs that folder in a child pytest with the variable
set; inside that child (or any run with TRITON_INTERPRET=1) the folder is collected as usual.
"""
import os
from pathlib import Path

INTERPRETED = Path(__file__).parent / "kernels" / "interpreted"
UNDER_INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1"


def pytest_ignore_collect(collection_path, config):
    if not UNDER_INTERPRETER and collection_path == INTERPRETED:
        return True
    return None


def _index_one_element_arrays() -> None:
    """Triton 3.6's interpreter turns a scalar into an int with int(data) where data is a
    one-element array, which NumPy 2.4 refuses ("only 0-dimensional arrays can be converted
    to Python scalars"): every loop with a run-time bound (range(s0, i_t + 1), range(0, NT))
    then fails under the interpreter, whatever the kernel. Later Triton squeezes the array
    first; do the same on the versions that do not."""
    import triton
    from triton.runtime import interpreter
    if not triton.__version__.startswith("3.6."):
        return
    patch_tensor = interpreter._patch_lang_tensor

    def patched(tensor, scope):
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    interpreter._patch_lang_tensor = patched


if UNDER_INTERPRETER:
    try:
        _index_one_element_arrays()
    except ImportError:     # no triton: the interpreted tests skip themselves
        pass


# Hypothesis: CI runs each property test with its own bounded example count; a long local run
# multiplies the unbounded ones: HYPOTHESIS_PROFILE=long python -m pytest tests/lineage
from hypothesis import settings as _settings  # noqa: E402

_settings.register_profile("long", max_examples=5000, deadline=None)
_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# `lineage snapshot` and the app keep traces in the user's cache directory (lineage/playback/
# cache.py): the suite keeps none, so no test depends on what an earlier one left there; the
# cache's own tests set a directory of their own
os.environ["LINEAGE_CACHE_DIR"] = "off"


# A small file system for full-disk tests: a real tmpfs of a few hundred KB, so ENOSPC comes
# from the kernel at whatever write hits it. Mounting needs root; elsewhere such tests skip.
import shutil as _shutil  # noqa: E402
import subprocess as _subprocess  # noqa: E402

import pytest as _pytest  # noqa: E402


def _holds(path: Path, n: int) -> bool:
    """Whether n bytes fit in a file at path (which is removed again)."""
    try:
        with open(path, "wb") as f:
            f.write(b"\0" * n)
            f.flush()
            os.fsync(f.fileno())
        return True
    except OSError:
        return False
    finally:
        path.unlink(missing_ok=True)


@_pytest.fixture
def small_fs(tmp_path):
    """small_fs(kb) -> a directory on a fresh tmpfs of that size (unmounted after the test)."""
    mounted = []

    def make(kb: int) -> Path:
        where = tmp_path / f"small{len(mounted)}"
        where.mkdir()
        if _shutil.which("mount") is None or os.geteuid() != 0 or _subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={kb}k,mode=0700", "tmpfs", str(where)], capture_output=True).returncode:
            _pytest.skip("no small file system here (mounting a tmpfs needs root)")
        mounted.append(where)
        if _holds(where / "probe", 2 * kb * 1024):          # some sandboxes (gVisor) ignore size=
            _pytest.skip(f"a {kb} KB tmpfs here holds {2 * kb} KB: its size limit is not enforced")
        return where
    yield make
    for where in mounted:
        _subprocess.run(["umount", "-l", str(where)], capture_output=True)
