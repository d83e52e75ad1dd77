"""The import graph of the project's packages, read from the source: every import counts, those
inside functions too (a lazy import that leads back is still a cycle, only a later one).
the Triton kernel files import nothing of the project beyond each other, nothing but the app and
the command line imports the UI, and no
module reaches itself again."""
import ast
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lineage",)
# the Triton kernels and their launchers: torch and triton only, never the references they are checked against
KERNELS = ("lineage.ops.kernels", "lineage.ops.delta.chunk", "lineage.ops.delta.fused_recurrent",
           "lineage.ops.situ.fused", "lineage.ops.moe.fused_step")


def _modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            found[".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")] = f
    return found


def _targets(mod: str, path: Path, node, modules) -> list[str]:
    """What an import statement names: `from pkg import module` names the module (its package
    comes along anyway, as every parent does), `from pkg import name` the package."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    here = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    if node.level:
        here = here[: len(here) - node.level + 1]
        prefix = ".".join(here + ([node.module] if node.module else []))
    else:
        prefix = node.module
    subs = [f"{prefix}.{a.name}" for a in node.names if f"{prefix}.{a.name}" in modules]
    return subs if len(subs) == len(node.names) else subs + [prefix]


def _graph():
    modules = _modules()
    edges = set()
    outside = []                   # (module, the top-level package of what it imports)
    for mod, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(mod, path, node, modules):
                outside.append((mod, target.split(".")[0]))
                while target and target not in modules:        # a name inside a module: the module
                    target = target.rpartition(".")[0]
                if target and target != mod:
                    edges.add((mod, target))
    return modules, edges, outside


def test_no_import_cycles():
    modules, edges, _ = _graph()
    graph = {m: set() for m in modules}
    for a, b in edges:
        graph[a].add(b)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        raise AssertionError(f"import cycle: {' -> '.join(e.args[1])}") from None


def _is_kernel(mod: str) -> bool:
    return mod in KERNELS or mod.startswith("lineage.ops.delta.chunk_")


def test_kernels_import_only_kernels_and_lineage_no_ui():
    modules, edges, outside = _graph()
    assert all(m in modules for m in KERNELS), "a kernel module moved: update KERNELS"
    assert [(a, b) for a, b in edges if _is_kernel(a) and not _is_kernel(b)] == []
    assert [(m, t) for m, t in outside if _is_kernel(m) and t not in ("torch", "triton", "lineage", "__future__",
                                                                       "importlib", "os", "math", "inspect", "typing")] == []
    # the Textual app is lineage.app; the model side never reaches it or the UI libraries
    assert [(m, t) for m, t in outside if not m.startswith(("lineage.app", "lineage.cli"))
            and t in ("textual", "rich", "textual_serve")] == []
    assert [(a, b) for a, b in edges if not a.startswith(("lineage.app", "lineage.cli")) and b.startswith("lineage.app")] == []
