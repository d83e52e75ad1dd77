"""Located problems: one line each, `FILE:LINE:COL: field.path: message`."""
from __future__ import annotations

from dataclasses import dataclass

from ..escapes import visible

Path_ = tuple  # a path into the data: ("panels", 0, "layer")
MAX_MESSAGE = 1000     # characters of a message shown: one that quotes a 900 KB value is still a line
MAX_NAME = 40          # characters of one key in a dotted path (a key may be any long string)
MAX_SHOWN = 20         # problems said of one file: a 150 KB file of mistakes printed 12,923 lines


@dataclass(frozen=True)
class Problem:
    file: str
    line: int          # 1-based
    col: int           # 1-based
    path: str          # dotted field path, "" for the whole file
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        message = self.message if len(self.message) <= MAX_MESSAGE else self.message[:MAX_MESSAGE - 3] + "..."
        # one line per problem, whatever the message quoted, and no control character reaches the terminal
        return visible(f"{self.file}:{self.line}:{self.col}: {where}{message}", keep_newlines=False)


class ScenarioError(Exception):
    """One or more located problems, all kept in `problems`; str() and lines() give one line per
    problem for the first MAX_SHOWN, then one saying how many more (the first are what to fix
    first: later ones are often the same mistake repeated)."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        out = [str(p) for p in self.problems[:MAX_SHOWN]]
        more = len(self.problems) - MAX_SHOWN
        if more > 0:
            out.append(visible(f"{self.problems[MAX_SHOWN].file}: and {more:,} more problem{'s' if more > 1 else ''} "
                               f"(the first {MAX_SHOWN} are shown)", keep_newlines=False))
        return out


def dotted(path: Path_) -> str:
    out = ""
    for p in path:
        name = str(p) if len(str(p)) <= MAX_NAME else str(p)[:MAX_NAME - 3] + "..."
        out += f"[{p}]" if isinstance(p, int) else (f".{name}" if out else name)
    return out
