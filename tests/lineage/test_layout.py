"""The rooms of lineage/ keep their promises: scenario/ needs no torch, the toy memory needs no
pydantic schema, and no module imports another that (directly or not) imports it back."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)


def test_scenario_package_is_torch_free():
    r = _fresh("import sys; import lineage.scenario, lineage.scenario.tasks, lineage.arithmetic, lineage.figures; "
               "assert 'torch' not in sys.modules, 'torch imported'")
    assert r.returncode == 0, r.stderr


def test_configs_and_the_mixer_registry_are_torch_free():
    """Every mixer's config.py comes with lineage.configs (MIXERS is built from them); its
    module.py, beside it, is the only part that needs torch."""
    r = _fresh("import sys, re; import lineage.configs, lineage.presets, lineage.config_dict; "
               "mods = [m.config.__module__ for m in lineage.configs.MIXERS.values()]; "
               "assert mods and all(re.fullmatch(r'lineage\\.mixers\\.\\w+\\.config', m) for m in mods), mods; "
               "assert 'torch' not in sys.modules, 'torch imported'")
    assert r.returncode == 0, r.stderr


def test_toy_memory_does_not_import_the_schema():
    r = _fresh("import sys; import lineage.playback.toy; "
               "assert 'pydantic' not in sys.modules and 'lineage.scenario' not in sys.modules, "
               "sorted(m for m in sys.modules if m.startswith(('lineage', 'pydantic')))")
    assert r.returncode == 0, r.stderr


def test_every_lineage_module_imports_alone_without_textual():
    """Each module imported first in a fresh interpreter: a cycle shows as an ImportError of a
    partly initialised module; the UI libraries must never come along."""
    names = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                   for p in (ROOT / "lineage").rglob("*.py")
                   # the app, the server that serves it, and `python -m lineage` (which runs the command)
                   if p.relative_to(ROOT / "lineage").parts[0] not in ("app", "__main__.py")
                   and p.relative_to(ROOT / "lineage").as_posix() != "cli/serve.py")
    code = ("import importlib, sys\n"
            f"for name in {names!r}:\n"
            "    for m in [m for m in sys.modules if m == 'lineage' or m.startswith('lineage.')]:\n"
            "        del sys.modules[m]\n"
            "    importlib.import_module(name)\n"
            "assert not any(m.split('.')[0] in ('textual', 'rich') for m in sys.modules), 'UI library imported'\n")
    r = _fresh(code)
    assert r.returncode == 0, r.stderr
