"""The bundled scenario files (YAML), their trained weights (weights/) and held-out text (data/),
installed as package data: `lineage list` and `lineage run NAME` find them through
importlib.resources from a wheel as from a checkout. Scenarios name their weights relative to
this folder (`checkpoint: weights/tiny-kda-mqar.safetensors`)."""
from importlib.resources import files
from pathlib import Path

# a wheel installs as plain files (the package is not zip-safe: torch and safetensors read the
# weights by path), so the resource folder is a real directory
DIR = Path(str(files(__name__)))


def resolve(name: str) -> str:
    """A path as given, or what it names among the bundled files: a scenario's name ('tour' ->
    DIR/tour.yaml), or a path under `scenarios/` as a checkout had it before the files moved into
    the package (`scenarios/weights/k3-mini-text.safetensors`), when no such file is here."""
    p = Path(name)
    if p.exists():
        return name
    if not p.suffix and (DIR / f"{name}.yaml").exists():
        return str(DIR / f"{name}.yaml")
    if len(p.parts) > 1 and p.parts[0] == "scenarios" and (DIR.joinpath(*p.parts[1:])).exists():
        return str(DIR.joinpath(*p.parts[1:]))
    return name
