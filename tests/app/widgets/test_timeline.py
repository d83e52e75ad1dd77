"""The timeline and the loading screen before anything is open: never 'step 1 / 0', a spinner
that turns, and the progress of a long jump."""
from textual.app import App

from tests.app.helpers import run
from lineage.app.widgets.loading import Loading
from lineage.app.widgets.timeline import Timeline


class Host(App):
    def compose(self):
        yield Timeline()
        yield Loading()


def test_timeline_and_loading_before_anything_is_open():
    async def go():
        app = Host()
        async with app.run_test(size=(80, 10)) as pilot:
            timeline, loading = app.query_one(Timeline), app.query_one(Loading)
            assert timeline._label().strip() == "opening …" and "/ 0" not in str(timeline.render())
            loading.start("opening tour.yaml")
            first = str(loading.render())
            await pilot.pause(0.25)
            loading.at("tour.yaml: starting PyTorch")
            later = str(loading.render())
            assert "opening tour.yaml" in first and "starting PyTorch" in later
            assert first[0] != later[0] and first[0] in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"      # the spinner turns
            timeline.set(0, 1000, 1, False, "1")
            timeline.progress(412, 900)
            assert "step 1 / 1000  computing 412 / 900, esc cancels" in timeline._label() and timeline.made == 412
            timeline.progress(None)
            assert "computing" not in timeline._label() and "paused" in timeline._label()
            loading.done()
            assert not loading.display
    run(go())
