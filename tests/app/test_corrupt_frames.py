"""A trace whose frame 10 is corrupt: the app says which step failed and keeps working on the
frames before it; playing into it stops there with the same dialog (issue 19)."""
import asyncio
from pathlib import Path

from lineage.playback.trace import TraceReader
from lineage.app.app import LineageApp
from lineage.cli.main import main
from tests.app.helpers import counter, shown_step, until
from lineage.app.screens.error import ErrorScreen

ROOT = Path(__file__).resolve().parents[2]


def _corrupt_trace(tmp_path) -> Path:
    path = tmp_path / "t.trace"
    assert main(["record", str(ROOT / "lineage" / "scenarios" / "recall.yaml"), "-o", str(path), "--steps", "20"]) == 0
    r = TraceReader(path)
    offset, n, _ = r._offsets[9]                    # frame 10's payload
    r.close()
    data = bytearray(path.read_bytes())
    data[offset + n // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def test_a_corrupt_frame_is_a_dialog_and_earlier_frames_stay(tmp_path):
    path = _corrupt_trace(tmp_path)

    async def go():
        app = LineageApp(str(path))
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: shown_step(app) is not None, "the first frame")
            app.request(9)
            await until(pilot, lambda: isinstance(app.screen, ErrorScreen), "the error dialog")
            assert "Step 10" in app.screen.title_text and "checksum" in app.screen.lines[0]
            await pilot.press("escape")
            app.request(3)
            await until(pilot, lambda: shown_step(app) == 3, "step 4")
            app.request(0)
            await until(pilot, lambda: shown_step(app) == 0, "step 1")
            await pilot.press(*"+++++", "space")            # play at max speed into the corrupt frame
            await until(pilot, lambda: isinstance(app.screen, ErrorScreen), "the dialog while playing")
            assert "Step 10" in app.screen.title_text and "❚❚ paused" in counter(app)
    asyncio.run(go())
