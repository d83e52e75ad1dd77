"""The bundled scenario files (YAML). A package only so that they install with lineage:
`lineage list` and `lineage run NAME` find them from a wheel as from a checkout."""
from pathlib import Path

DIR = Path(__file__).resolve().parent
