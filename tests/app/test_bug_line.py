"""A programming error's dialog names the line of lineage's own code that raised it, and only
lineage's: a frame in another package (PyYAML, beside us in site-packages or the checkout's
.venv) is not reported as a bug in lineage."""
import yaml

from lineage.app.screens.stepping import _where
from lineage.arithmetic import fmt_bytes


def _raised(fn):
    try:
        fn()
    except Exception as e:      # noqa: BLE001  the error _where is shown
        return e
    raise AssertionError("nothing raised")


def test_an_error_in_lineage_names_its_line():
    (line,) = _where(_raised(lambda: fmt_bytes(None)))
    assert line.startswith("TypeError at lineage/arithmetic.py:") and "a bug in lineage" in line


def test_an_error_in_another_package_is_not_called_ours():
    e = _raised(lambda: yaml.reader.Reader(object()))
    assert _where(e) == [f"({type(e).__name__})"]
