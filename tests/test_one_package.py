"""One top-level import name, `lineage`: nothing of ours answers for another package's name. A
top-level `kernels/` here once shadowed Hugging Face's `kernels`, which transformers 5.25 imports
when a model module loads (`cannot import name 'CUDAProperties' from 'kernels'`)."""
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_only_top_level_package_is_lineage():
    packages = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    modules = sorted(p.name for p in ROOT.glob("*.py"))
    assert (packages, modules) == (["lineage"], [])
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert found["include"] == ["lineage*"]


def test_a_transformers_model_module_loads_beside_us():
    """Run from the checkout, where the current directory comes first on sys.path: whatever
    `kernels` is there, it is not ours, and a model module of transformers imports."""
    code = ("import importlib.util, sys\n"
            "from pathlib import Path\n"
            "spec = importlib.util.find_spec('kernels')\n"
            f"assert spec is None or Path(spec.origin).resolve().parent.parent != Path({str(ROOT)!r}), spec.origin\n"
            "import transformers.models.gpt2.modeling_gpt2, transformers.models.qwen3_next.modeling_qwen3_next\n"
            "from lineage.ops import kernels\n"
            "assert kernels.__name__ == 'lineage.ops.kernels'\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
