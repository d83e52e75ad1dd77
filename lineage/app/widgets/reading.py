"""What a map's legend reads out: the cell under the keyboard cursor or the mouse, with the block
of matrix cells it stands for where the map folds (widgets/heatmap.py makes it)."""
from __future__ import annotations

from dataclasses import dataclass

from .fitting import RULES


@dataclass(frozen=True)
class Reading:
    """What a map's legend reads out: the keyboard cursor's cell (`by` "cursor"), or the one the
    mouse is over ("mouse"): of the block under it (`rows` x `cols` of the matrix: two pixel rows
    a terminal cell, more where the map folds), the cell whose value the block is drawn with."""
    by: str
    row: int
    col: int
    value: float
    rows: range
    cols: range
    rule: str                  # how a block is drawn: fitting.RULES' key

    def of_rows(self, name=str) -> str:
        """' of 6-7' where the mouse's block holds more rows than the one read (`name(r)`
        names row r), else ''."""
        return f" of {name(self.rows[0])}-{name(self.rows[-1])}" if len(self.rows) > 1 else ""

    def of_cols(self, name=str) -> str:
        return f" of {name(self.cols[0])}-{name(self.cols[-1])}" if len(self.cols) > 1 else ""

    def among(self, row_name, col_name=None) -> str:
        """' (max of experts 4-7)' where the block holds more than this one value, else '':
        `row_name(a, b)` names rows a..b, `col_name(a, b)` columns (None: the columns unnamed)."""
        parts = []
        if len(self.rows) > 1:
            parts.append(row_name(self.rows[0], self.rows[-1]))
        if len(self.cols) > 1 and col_name is not None:
            parts.append(col_name(self.cols[0], self.cols[-1]))
        if not parts or self.rule == "mean":
            return ""
        return f" ({RULES[self.rule]} of {', '.join(parts)})"
