"""The main screen: the panels of one scenario or trace, stepped token by token.

It owns the keys and the layout, opens files in a thread worker, and puts on the panels the
views a step worker prepared for them; asking for steps, those workers and playback are
screens/stepping.py's. Where playback stands is the Player's. Torch is imported inside the
loading worker (lineage/cli/loader.py), so the screen appears before the model exists; the UI
thread never touches a tensor. What a worker hands over after the screen began to be taken
down (the app quits while playing) is dropped (screens/messages.py).
"""
from __future__ import annotations

from pathlib import Path

from textual import work
from textual.binding import Binding
from textual.containers import Grid, Vertical
from textual.screen import Screen
from textual.widgets import Header, Static

from lineage.playback.session import caption_at

from lineage.cli import served
from lineage.cli.loader import Unopened, open_for_app
from ..panels import default_panels, docked, make_panel
from ..panels.base import Panel
from ..panels.captions import CaptionsPanel
from lineage.playback.player import Player
from ..widgets.loading import Loading
from ..widgets.keys_footer import KeysFooter
from ..widgets.timeline import Timeline
from .error import ErrorScreen
from .help import HelpScreen
from .messages import Stage, taken_down, unless_taken_down
from .own_text import OwnText
from .stepping import Stepping

MIN_W, MIN_H = 60, 20
FILL_ROW = 14          # rows of panels at least this tall share the screen (no scrolling), pictures fill them


class MainScreen(Stepping, OwnText, Screen):
    # an export is read on a projector: each panel's title in the text colour, its border whole
    DEFAULT_CSS = """
    MainScreen.-slide Panel { border: round $primary; border-title-color: $foreground;
                              border-title-style: bold; }
    """
    ESCAPE_TO_MINIMIZE = False     # esc cancels a long jump first; action_escape minimises otherwise
    # a maximised panel keeps the step, the caption and the keys around it
    ALLOW_IN_MAXIMIZED_VIEW = "Footer, Timeline, #captionbar, #slidehead"
    BINDINGS = [
        Binding("space", "toggle_play", "play/pause"),
        Binding("n,right", "step(1)", "next"),
        Binding("p,left", "step(-1)", "prev"),
        Binding("home", "first", "first", show=False),
        Binding("end", "last", "last", show=False),
        Binding("plus,equals_sign", "speed(1)", "faster", key_display="+"),
        Binding("minus", "speed(-1)", "slower", key_display="-"),
        Binding("s", "snapshot", "snapshot"),
        Binding("m", "maximise", "maximise"),
        Binding("g", "goto", "go to", show=False),
        Binding("i", "own_text", "your text", show=False),
        Binding("b", "back", "the run before", show=False),
        Binding("left_square_bracket", "pick('layer', -1)", "layer-", show=False),
        Binding("right_square_bracket", "pick('layer', 1)", "layer+", show=False),
        Binding("comma", "pick('head', -1)", "head-", show=False),
        Binding("full_stop", "pick('head', 1)", "head+", show=False),
        # a real checkpoint has 27-48 layers and 32 heads: jump eight at a time
        # ({ } are the captions', on the app)
        Binding("left_parenthesis", "pick('layer', -8)", "layer-8", show=False),
        Binding("right_parenthesis", "pick('layer', 8)", "layer+8", show=False),
        Binding("less_than_sign", "pick('head', -8)", "head-8", show=False),
        Binding("greater_than_sign", "pick('head', 8)", "head+8", show=False),
        Binding("t", "pick('quantity', 1)", "S/dS/err", show=False),
        # a caption longer than its bar (its border says so) scrolls, whatever has the focus
        Binding("down", "scroll_caption(1)", "caption down", show=False),
        Binding("up", "scroll_caption(-1)", "caption up", show=False),
        # a panel taller than its room (its title says which lines show), else the panels
        Binding("pagedown", "scroll_panel(1)", "panel down", show=False),
        Binding("pageup", "scroll_panel(-1)", "panel up", show=False),
        Binding("question_mark,f1", "help", "help"),
        Binding("q", "app.quit", "quit"),
        Binding("escape", "escape", "cancel / restore", show=False),
    ]

    def __init__(self, player: Player, path: str, salvage: bool = False, cursor=None):
        """`cursor`: the Session or Replay of `path`, already open (headless snapshots)."""
        super().__init__()
        self.player, self.path, self.salvage = player, path, salvage
        self._given = self._borrowed = cursor     # a cursor given is its giver's to close
        self._panels: tuple = (None, ())   # (cursor, its panels): what the step workers prepare for
        self._notes_shown = 0          # how many of the cursor's notes the status line shows
        self._about = None             # the caption whose panel was last brought into view
        self.slide_columns = None      # an export's columns (lineage/app/headless.py: titles kept whole)
        self.slide_fill = False        # an export fitted to its text: its rows share the screen

    # -- layout -----------------------------------------------------------------------
    def compose(self):
        yield Header(show_clock=False, icon="≋")
        yield Timeline(id="timeline")
        yield Loading(id="loading")
        yield Grid(id="panels")
        yield Vertical(id="captionbar")
        yield Static("", id="toosmall")
        yield Static("", id="status")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(Loading).start(f"opening {Path(self.path).name}")
        self._fit_layout()
        if self._given is not None:
            self._opened(self._given, self.path)
            self._given = None
        else:
            self.open(self.path)

    def on_unmount(self) -> None:
        # the widgets are gone by now (Textual removes them first): stop touches none of them
        self.stop()                    # frees a max-speed worker waiting for the screen
        if self.player.cursor is not self._borrowed:
            self.player.close()        # a session publishes the frames it kept for next time

    def on_resize(self, event) -> None:
        self._fit_layout(event.size)

    def on_captions_panel_height_set(self, event) -> None:
        # the bar's height is known only once its first caption is drawn; until then the rows
        # were fitted to a guess, and rows that fit might have been left scrolling
        self.call_after_refresh(self._fit_layout)

    def on_panel_grew(self, event) -> None:
        # a table's rows are known once it is drawn: its row of the grid may need more than a share
        self.call_after_refresh(self._fit_layout)

    @unless_taken_down                 # a resize or the bar's message may come as the app quits
    def _fit_layout(self, size=None) -> None:
        """Columns by width; below the minimum a notice says what size is needed."""
        w, h = size or self.app.size
        small = (w < MIN_W or h < MIN_H) and not self.slide_fill     # a picture fitted to its text is no app
        notice = self.query_one("#toosmall", Static)
        notice.display = small
        notice.update(f"lineage needs at least {MIN_W} x {MIN_H}; this terminal is {w} x {h}. Enlarge it or press q.")
        grid = self.query_one("#panels", Grid)
        grid.display = not small
        shown = sum(1 for p in grid.children if p.display)
        # no more columns than panels shown: hidden panels leave their room to the others
        cols = max(1, min(self.slide_columns or (3 if w >= 150 else 2 if w >= 100 else 1), shown))
        grid.styles.grid_size_columns = cols
        # when every row of panels gets FILL_ROW lines, the rows share the screen and heatmaps
        # grow into them; otherwise panels take their natural height and the grid scrolls
        rows = -(-shown // cols)
        room = h - 4 - (self.query_one("#captionbar").outer_size.height or 5)
        fill = rows > 0 and (room >= rows * FILL_ROW or self.slide_fill)
        grid.set_class(fill, "-fill")
        # the caption's panels come whole (a slide shows the panels it was asked for, lineage/app/headless.py)
        about = self._about[1] if self._about and not self.has_class("-slide") else ()
        grid.styles.grid_rows = _row_heights(grid, cols, rows, room, about) if fill else None
        # rows that scroll (120x40): a table the caption quotes is shown whole where the grid's
        # height holds it, not capped at a text panel's usual height and scrolled
        for p in grid.children:
            if isinstance(p, Panel):
                p.set_class(not fill and p.kind in about and 0 < p.need <= room, "-whole")
        # narrow: a compact footer (which drops the least needed keys itself), so `? help`,
        # `q quit`, `m` and the palette key stay on it at 80 columns; below 60 the palette goes
        footer = self.query_one(KeysFooter)
        footer.compact = w < 120
        footer.show_command_palette = w >= 60

    @unless_taken_down
    def _show_status(self) -> None:
        cursor = self.player.cursor
        info = cursor.info if cursor else {}
        # an export (headless) reports "standard" but is drawn in full colour
        depth = "none (NO_COLOR)" if self.app.no_color else \
            "truecolor" if self.app.is_headless else (self.app.console.color_system or "none")
        bits = [f"device {info.get('device', '?')}", f"backend {info.get('backend', 'reference')}",
                f"colour {depth}"]
        if cursor is not None and type(cursor).__name__ == "Replay":
            bits.append("replaying a trace (no torch)")
        elif cursor is not None and type(cursor).__name__ == "Warm":
            bits.append("opened on cached frames (LINEAGE_CACHE_DIR=off to make them afresh)")
        notes = _notes(cursor) if cursor is not None else []
        self._notes_shown = len(notes)
        self.query_one("#status", Static).update(" · ".join(bits + notes))

    # -- opening ----------------------------------------------------------------------
    def open(self, path: str):
        """Open a scenario or trace in a worker (returned); on failure the screen keeps what it had.
        Served to a browser, a path outside the served root is refused here, unread (no worker)."""
        refused = served.refusal(str(path))
        if refused is not None:
            self._open_failed(str(path), [refused], quotes_file=False)
            return None
        self.query_one(Loading).start(f"opening {Path(path).name}")    # above what is still shown
        return self._load_path(str(path))

    @unless_taken_down
    def on_stage(self, message: Stage) -> None:
        self.query_one(Loading).at(message.text)

    @work(thread=True, exclusive=True, group="load")
    def _load_path(self, path: str) -> None:
        try:
            cursor = open_for_app(path, self.salvage, lambda text: self.post_message(Stage(text)))
        except Unopened as e:
            self.app.call_from_thread(self._open_failed, path, e.lines)
            return
        try:
            self.app.call_from_thread(self._opened, cursor, path)
        except RuntimeError:
            if not taken_down(self):   # not the quit below: a bug in _opened, not hidden
                raise
            # the app quit while this opened (q during "opening ..."): nobody else will close it,
            # and closing is what publishes a session's cache entry
            if cursor is not self._borrowed:
                cursor.close()

    @unless_taken_down
    def _open_failed(self, path: str, lines: list[str], quotes_file: bool = True) -> None:
        keeping = self.player.cursor.info["title"] if self.player.cursor else None
        self.query_one(Loading).done()
        shown = served.shown_problems(lines, path) if quotes_file else lines   # served: no file content
        self.app.push_screen(ErrorScreen(f"Could not open {path}", shown, keeping))

    def _opened(self, cursor, path: str) -> None:
        if taken_down(self):           # opened as the app quit: nobody will show or close it
            if cursor is not self._borrowed:
                cursor.close()
            return
        self.stop()
        self.player.open(cursor)
        self.path = path
        self.app.title = cursor.info["title"]
        self.app.sub_title = Path(path).name
        self.query_one(Loading).done()
        if self.maximized is not None:     # the panel is about to go: the new ones open side by side
            self.minimize()
        grid = self.query_one("#panels", Grid)
        grid.remove_children()
        made = [make_panel(p) for p in default_panels(cursor.info)]
        in_grid, in_bar = docked(made, cursor.info)
        grid.mount_all(in_grid)
        bar = self.query_one("#captionbar", Vertical)
        bar.remove_children()
        bar.mount_all(in_bar)
        made = in_grid + in_bar
        self._panels = (cursor, tuple(made))
        self._fit_layout()
        # focus decided here, not by whichever widget mounted first: the pickers act on the
        # focused panel, so start on the first one that has layers to pick. Without scrolling
        # to it: a small terminal opens at the top of the layout, whenever the focus lands
        first = next((p for p in made if p.pickable), made[0])
        self.call_after_refresh(first.focus, False)
        self._show_status()
        early, self._early = self._early, None
        self.call_after_refresh(self.request, early or 0)

    # -- showing a step ---------------------------------------------------------------
    @unless_taken_down
    def _show_frame(self, cursor, i: int, views: list) -> None:
        if not self.player.shown(cursor, i):
            return                             # a frame of a scenario that was replaced meanwhile
        for panel, room, view in views:        # all handed over before any draws: shared scales
            panel.take(cursor, i, room, view)
        for panel, _, _ in views:
            panel.paced_show(self.player.playing)
        timeline = self.query_one(Timeline)
        if timeline.computing is not None and not self.player.pending:
            timeline.progress(None)
        self._update_timeline()
        self._bring_into_view(cursor, i)
        if len(_notes(cursor)) != self._notes_shown:    # said while stepping: the trace cache gave up, say
            self._show_status()

    def _bring_into_view(self, cursor, i: int) -> None:
        """When a caption about panels comes (playback, `{ }`, a jump), they come into view:
        scrolled so their tops show (all of them where they fit together, else the first), or
        the first maximised in place of another maximised one. At 80x24 the panel a caption
        discusses is otherwise often below the fold, or its top cut. The first of them takes
        the focus, so `m` and the pickers act on the panel the caption is about. Once per
        caption, so the reader can scroll (and tab) away while it stays."""
        from ..snapshot import caption_panels
        if self.has_class("-slide"):            # an export shows the panel it was asked for
            return
        c = caption_at(cursor.info.get("captions") or [], i)
        key = None if c is None else (c["at"], caption_panels(c))
        if key == self._about:
            return
        self._about = key
        self._fit_layout()             # a table the caption is about gets the rows it needs
        grid = self.query_one("#panels", Grid)
        shown = [p for p in grid.children if isinstance(p, Panel) and p.display]
        targets = [p for kind in caption_panels(c) for p in shown if p.kind == kind]
        if not targets:
            return
        if isinstance(self.maximized, Panel):
            first = self.maximized if self.maximized in targets else targets[0]
            self.maximize(first)
            first.focus(False)
        else:
            targets[0].focus(False)             # not scrolled to here: _scroll_to_panels does
            # after the refresh: the caption bar's new height changes the grid's, and a scroll
            # made before it cut the panel's top
            self.call_after_refresh(self._scroll_to_panels, targets)

    @unless_taken_down
    def _scroll_to_panels(self, targets: list) -> None:
        grid = self.query_one("#panels", Grid)
        view = grid.scrollable_content_region.height
        top = min(p.virtual_region.y for p in targets)
        bottom = max(p.virtual_region.bottom for p in targets)
        # all of them where they fit, from the top of the highest; else the first from its
        # top (one taller than the grid is not maximised: `m` does that, and the reader keeps
        # the grid they were reading)
        grid.scroll_to(y=top if bottom - top <= view else targets[0].virtual_region.y, animate=False)

    # -- panels -----------------------------------------------------------------------
    def focused_panel(self) -> Panel | None:
        w = self.focused
        while w is not None and not isinstance(w, Panel):
            w = w.parent
        if w is None:
            return next((p for p in self.query(Panel) if p.pickable), None)
        return w

    def action_pick(self, what: str, delta: int) -> None:
        panel = self.focused_panel()
        if panel is None or self.player.cursor is None:
            return
        changed = {"layer": panel.pick_layer, "head": panel.pick_head,
                   "quantity": lambda d: panel.cycle_quantity()}[what](delta)
        if changed:
            panel.show(self.player.cursor, self.player.index)

    def action_maximise(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        panel = self.focused_panel()
        if panel is not None:
            self.maximize(panel)

    def watch_maximized(self, before, now) -> None:
        # a content-sized panel gets no resize when maximised or restored (m, esc, the palette):
        # redraw it in its new room, so a figure's plot follows
        if isinstance(now, Panel) and now.styles.inline.has_rule("height"):
            # a height set to its content in the grid would beat the CSS's 1fr: the panel
            # floated mid-screen with blank rows around it (its redraw in the grid sets it again)
            now.styles.height = None
            if hasattr(now, "_sized"):
                now._sized = None
        for w in (before, now):
            if isinstance(w, Panel):
                self.call_after_refresh(_redraw_if_kept, w)

    def action_scroll_caption(self, pages: int) -> None:
        for bar in self.query(CaptionsPanel):
            bar.scroll_note(pages)

    def action_scroll_panel(self, pages: int) -> None:
        """A page of the focused panel where it scrolls (a table maximised at 80x24); otherwise
        of the panels, where they do not all fit."""
        panel = self.focused_panel()
        if panel is not None and panel.max_scroll_y > 0:
            target = panel
        elif self.maximized is None:
            target = self.query_one("#panels", Grid)
        else:
            return
        (target.scroll_page_down if pages > 0 else target.scroll_page_up)(animate=False)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.query(Panel)))

    def action_snapshot(self) -> None:
        if self.player.cursor is None:
            return
        if self.player.pending:        # the screen still shows an earlier step than the one asked for
            self.notify(f"step {self.player.target + 1} is still being computed: press s once it is shown "
                        "(esc cancels the jump)", severity="warning")
            return
        if self.player.index < 0:      # play from the end starts again before step 1 is shown: no step to name
            self.notify("playing from the start: press s once step 1 is shown", severity="warning")
            return
        from ..snapshot import save_from_app
        save_from_app(self)            # SVG, PNG and text under a fresh name; it says where


def _redraw_if_kept(panel: Panel) -> None:
    """A maximised (or restored) panel's redraw, once the layout has its new room, unless the
    panel is gone meanwhile: opening another file restores the maximised panel and removes it,
    and a redraw after that finds none of its widgets (NoMatches: '#body')."""
    if panel.is_attached and not (panel._pruning or panel._closing or panel._closed):
        panel.redraw()


def _row_heights(grid, cols: int, rows: int, room: int, about=()) -> str | None:
    """The rows of panels sharing the screen: a row holding a text panel of a kind in `about`
    (what the caption on screen discusses) that needs more than an equal share gets what it
    needs, where the other rows keep FILL_ROW each; else None, equal shares. At 160x50 the
    tour's depth table (2L + 3 lines and its border) needs 23 rows of 42: while its caption
    quotes the `output` row, the row above gives two and its state map folds (and says so); at
    other captions that map keeps its 32 rows whole and the table scrolls, its title saying
    which lines show."""
    shown = [p for p in grid.children if isinstance(p, Panel) and p.display]
    needs = [max((p.need for p in shown[r * cols:(r + 1) * cols] if p.kind in about), default=0)
             for r in range(rows)]
    share = room // rows
    fixed = {r: n for r, n in enumerate(needs) if n > share}
    left = rows - len(fixed)
    if not fixed or not left or room - sum(fixed.values()) < left * FILL_ROW:
        return None
    return " ".join(str(fixed[r]) if r in fixed else "1fr" for r in range(rows))


def _notes(cursor) -> list[str]:
    """What the cursor has to say (a device fallback, a trace cache that gave up), its session's
    too when it opened on cached frames and made more later (a Warm cursor)."""
    notes = list(cursor.info.get("notes", []))
    session = getattr(cursor, "session", None)
    if session is not None:
        notes += [n for n in session.info.get("notes", []) if n not in notes]
    return notes
