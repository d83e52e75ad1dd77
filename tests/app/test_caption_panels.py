"""Captions naming several panels: a slide of each panel a caption names carries it, a slide
of another does not; the app at 80x24 brings the named panels into view with their tops
showing; a picture of the captions alone is refused in one line."""
import pytest

from lineage.app.headless import render_svg, slide_kinds
from lineage.app.snapshot import about, caption_panels

from tests.app.helpers import SC, opened, panel, run, settle


def test_a_caption_goes_with_each_panel_it_names():
    c = {"at": 0, "until": None, "shot": None, "panel": "state", "panels": ["state", "decay"], "text": "t"}
    assert [about(c, k) for k in ("state", "decay", "recall", None, "captions")] == [True, True, False, True, True]
    old = {"at": 0, "until": None, "shot": None, "panel": "state", "text": "t"}    # a trace from before
    assert caption_panels(old) == ("state",) and not about(old, "decay")


def test_a_whole_screen_slide_shows_every_panel_its_caption_names():
    from lineage.playback.session import Session
    from lineage.scenario import load
    s = Session(load(SC / "fig6_channel_decay.yaml"))
    try:
        assert slide_kinds(s.info, 0) == ("state", "decay")
    finally:
        s.close()


def test_a_picture_of_the_captions_alone_is_refused():
    with pytest.raises(RuntimeError, match="--panel captions"):
        render_svg(str(SC / "fig6_channel_decay.yaml"), 0, "captions")


def test_at_80x24_the_panel_a_caption_names_shows_from_its_top():
    async def go():
        async with opened("fig6_channel_decay", (80, 24)) as (pilot, app):
            for _ in range(2):                       # the recall caption, then back to state's
                for key in ("}", "{"):
                    await pilot.press(key)
                    await pilot.pause(0.5)
                    grid = app.main.query_one("#panels")
                    kind = "recall" if key == "}" else "state"
                    p = panel(app, kind).region
                    view = grid.content_region
                    assert view.y <= p.y and (p.bottom <= view.bottom or kind == "state"), (key, p, view)
    run(go())


def test_the_first_panel_a_caption_names_takes_the_focus():
    """So `m` maximises, and the pickers pick on, the panel the caption is about: at 80x24 the
    tour's captions about decay, routing and depth each leave their panel focused, and a
    maximised panel gives way to the next caption's, focused too."""
    async def go():
        async with opened("tour", (80, 24)) as (pilot, app):
            assert app.main.focused_panel().kind == "state"      # the first caption's, and the first pickable
            for kind, i in (("decay", 4), ("routing", 12), ("depth", 24)):
                await pilot.press("}")
                await settle(pilot, app, i)
                await pilot.pause()
                assert app.main.focused_panel().kind == kind, i
            await pilot.press("m")
            await pilot.pause()
            assert app.main.maximized is panel(app, "depth")
            await pilot.press("{")
            await settle(pilot, app, 12)
            await pilot.pause()
            assert app.main.maximized is panel(app, "routing") and app.main.focused_panel().kind == "routing"
    run(go())
