"""What the app's tests share: where the bundled scenarios are, the app opened at a step,
waiting until a frame is shown, a slide of a step, the step counter, a panel of a kind, and
the text of the screen as an SVG export shows it, and waiting for a condition (a layout
lands later than the frame on a loaded machine: a fixed pause is a race)."""
import asyncio
import re
from contextlib import asynccontextmanager
from html import unescape
from pathlib import Path

from lineage.app.app import LineageApp
from lineage.app.headless import settle as settled
from lineage.app.panels.base import Panel
from lineage.app.widgets.timeline import Timeline

ROOT = Path(__file__).resolve().parents[2]
SC = ROOT / "lineage" / "scenarios"


async def settle(pilot, app, index=None, timeout=60.0):
    """Wait until the app's workers are done and a frame is shown (and, if given, it is frame
    `index`). Workers done is not enough alone: the first frame is asked for after a refresh,
    so on a loaded machine the workers can all be done before its worker has started."""
    def shown() -> bool:
        step = shown_step(app)
        return step is not None and (index is None or step == index)

    async def until_shown():
        await settled(pilot)
        while not shown():
            await pilot.pause(0.05)
            await settled(pilot)
    try:
        await asyncio.wait_for(until_shown(), timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"no frame (index {app.index}, wanted {index})") from None


async def until(pilot, cond, what: str, timeout: float = 20.0) -> None:
    """Pause until cond() holds; an AssertionError naming `what` after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


@asynccontextmanager
async def opened(source, size, index=0):
    """The app on `source` (a bundled scenario's name, or the path of a file) in a terminal of
    `size`, its first frame shown, then (where given) 0-based step `index`: what most app tests
    start with. `async with opened("tour", (160, 50), 120) as (pilot, app): ...`"""
    app = LineageApp(str(SC / f"{source}.yaml") if isinstance(source, str) else str(source))
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app, 0)
        if index:
            app.request(index)
            await settle(pilot, app, index)
        yield pilot, app


async def slide(pilot, app, index, kind=None):
    """The app drawn as `lineage snapshot` draws 0-based step `index`: a slide (of panel
    `kind`), at the app's size as given, not grown."""
    from lineage.app.headless import _show, _slide_mode
    _slide_mode(app, kind)
    await _show(app, pilot, index, kind, "test")


def shown_step(app) -> int | None:
    """The step the counter on screen shows (0-based), None until it shows one: it says
    'opening …' until the first frame is drawn."""
    m = re.search(r"step (\d+) / \d+", counter(app)) if app.main is not None else None
    return None if m is None else int(m[1]) - 1


def counter(app) -> str:
    return app.main.query_one(Timeline)._label()         # the main screen's, under any dialog


def run(coro):
    return asyncio.run(coro)


def panel(app, kind, n=0):
    """The app's n-th panel of a kind."""
    return [p for p in app.query(Panel) if p.kind == kind][n]


def svg_text(svg: str) -> str:
    """The characters an SVG export shows (text runs concatenated), borders as spaces."""
    body = svg[svg.index("<g"):]                                  # after the style sheet
    text = unescape(re.sub(r"<[^>]+>", "", body.replace("</text>", "</text>\n"))).replace("\xa0", " ")
    return re.sub("[▊▎│╭╮╰╯─▔▁]", " ", text)


def words(text: str) -> str:
    return " ".join(text.split())


def screen_text(app) -> str:
    return svg_text(app.export_screenshot())
