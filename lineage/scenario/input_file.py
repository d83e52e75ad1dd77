"""`input: {file: doc.txt}`: a scenario's input read from a text file beside it, for inputs too
long to paste into YAML (a 128K-token paper is some 500 KB; `input.text` holds at most
MAX_TEXT characters). The file is read when the scenario is loaded, so `lineage validate` and
`lineage run` read the same text and refuse the same files, each as one line located at
`input.file`: a missing file, one that is not regular, over MAX_INPUT_FILE bytes, or not UTF-8.
(Served to a browser, a file outside the served root is refused before this: served_paths.py.)"""
from __future__ import annotations

from pathlib import Path

from ..files import read_regular
from .problems import ScenarioError
from .reader import Located
from .schema import MAX_INPUT_FILE, Scenario

WHERE = ("input", "file")


def input_file_path(name: str, base_dir: Path | None) -> Path:
    """The file `input.file` names: relative to the scenario's folder (the current one without)."""
    p = Path(name).expanduser()
    return p if p.is_absolute() or base_dir is None else base_dir / p


def read_text_file(path: str | Path, limit: int = MAX_INPUT_FILE) -> str:
    """A regular file's text (UTF-8, a leading BOM dropped) of at most `limit` bytes; ValueError
    with the reason in a few words otherwise (no path in it: the caller says which file)."""
    try:
        raw = read_regular(path, limit)
    except FileNotFoundError:
        raise ValueError("no such file") from None
    except OSError as e:
        raise ValueError(e.strerror or str(e)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        before = raw[:e.start]
        line, col = before.count(b"\n") + 1, e.start - (before.rfind(b"\n") + 1) + 1
        raise ValueError(f"not UTF-8 text (byte {e.start:,}, line {line}, column {col})") from None
    text = text.removeprefix("\ufeff")
    if not text:
        raise ValueError("the file is empty")
    return text


def with_file_text(sc: Scenario, loc: Located, base_dir: Path | None) -> Scenario:
    """`sc` with its input file's text as `input.text` (unchanged without an input file);
    ScenarioError located at input.file when the file cannot be its input."""
    if sc.input is None or sc.input.file is None:
        return sc
    path = input_file_path(sc.input.file, base_dir)
    try:
        text = read_text_file(path)
    except (ValueError, OSError) as e:
        raise ScenarioError([loc.problem(WHERE, f"{sc.input.file}: {e}")]) from None
    # no validation again: the text is as long as the file is (MAX_TEXT bounds only `input.text`)
    return sc.model_copy(update={"input": sc.input.model_copy(update={"text": text})})


def relocated(problems: list, sc: Scenario | None, loc: Located) -> list:
    """Problems found in a file's text are said at input.file, where the user named it."""
    if sc is None or sc.input is None or sc.input.file is None:
        return problems
    return [loc.problem(WHERE, p.message) if p.path.startswith("input.text") else p for p in problems]
