"""`i`: the scenario on the reader's own text, typed in a box; Enter runs it (the models, weights
and panels of the scenario open now, its captions left out: they were written for its own input).
`b`: back to the run before, opened again (from the trace cache, so at once where it was kept).
The made scenario is lineage.cli.opening's, as `lineage run SCENARIO --text` makes it."""
from __future__ import annotations

from pathlib import Path

from lineage.cli import opening

from .ask import AskScreen

TRACES = (".trace",)


class OwnText:
    _runs: list | None = None      # (path, step) of the runs opened before, newest last (b goes back)

    def action_own_text(self) -> None:
        if self.player.cursor is None or not getattr(self, "path", None):
            return
        origin = opening.ORIGIN.get(self.path, self.path)
        if Path(origin).suffix in TRACES:
            self.notify("a recorded trace replays as it was recorded: open its scenario to run it on your text",
                        severity="warning", markup=False)
            return

        def done(text):
            if not text:
                return
            try:
                if Path(origin).is_dir():       # a checkpoint directory: as `lineage run DIR --text` makes it
                    made = opening.made_scenario(origin, text)
                else:
                    made = opening.own_input_scenario(origin, Path(origin).stem, text=text)
            except ValueError as e:             # NotOwnInput, a checkpoint's PretrainedError: one line
                self.notify(str(e), severity="warning", markup=False)
                return
            if self._runs is None:
                self._runs = []
            self._runs.append((self.path, max(self.player.index, 0)))
            self.open(made)

        self.app.push_screen(AskScreen("Your text: enter runs this scenario's models on it "
                                       "(its captions are left out; b goes back)", "type or paste a sentence"), done)

    def action_back(self) -> None:
        if not self._runs:
            self.notify("no run before this one (i runs this scenario on your text)", markup=False)
            return
        path, step = self._runs.pop()
        if self.open(path) is not None:
            self._early = step          # shown first once it is open, as a step asked for while opening
