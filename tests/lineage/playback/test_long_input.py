"""A long input as a user gives it (issue 30): `input: {file: doc.txt}` read beside the
scenario and refused in one located line as `validate` and `run` alike refuse it; the prefill's
progress; the memory it needs checked before anything grows; the note that says where the
steps start; and a prefill of 16K tokens whose peak memory does not grow with the prompt."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lineage.playback import runners
from lineage.playback.runners import MemoryRefused
from lineage.playback.session import Session, reporting_prefill
from lineage.scenario import load
from lineage.scenario.problems import ScenarioError
from lineage.scenario.schema import MAX_INPUT_FILE
from lineage.cli.main import main

ROOT = Path(__file__).resolve().parents[3]


def scenario(folder: Path, file: str = "doc.txt", prefill: int = 0, extra: str = "") -> Path:
    path = folder / "s.yaml"
    path.write_text(textwrap.dedent(f"""\
        version: 1
        title: a long input
        model: {{preset: tiny-hybrid}}
        input: {{file: {file}}}
        decoding: {{prefill: {prefill}}}
        panels: [{{kind: tokens}}, {{kind: cache}}]
        device: cpu       # the CPU's 4,096-token chunks and budget, on a GPU box too
        {extra}"""), encoding="utf-8")
    return path


def test_an_input_file_is_read_relative_to_the_scenario(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "doc.txt").write_text("hello, a file", encoding="utf-8")
    path = scenario(tmp_path, "data/doc.txt", prefill=7)
    monkeypatch.chdir("/")                          # not the current folder: the scenario's
    sc = load(path)
    assert sc.input.text == "hello, a file" and sc.input.file == "data/doc.txt"
    s = Session(sc, device="cpu")
    assert s.total == 6 and s.frame(0).token().text == "a"       # bytes 7.. of the file
    assert "prefilled 7 of 13 tokens" in s.info["notes"]
    s.close()


@pytest.mark.parametrize("case, why", [
    ("missing", "input.file: doc.txt: no such file"),
    ("large", f"input.file: doc.txt: file is {MAX_INPUT_FILE + 1:,} bytes (limit {MAX_INPUT_FILE:,})"),
    ("binary", "input.file: doc.txt: not UTF-8 text (byte 3, line 1, column 4)"),
    ("empty", "input.file: doc.txt: the file is empty"),
    ("directory", "input.file: doc.txt: a directory, not a regular file"),
])
def test_an_input_file_that_cannot_be_read_is_one_located_line(tmp_path, capsys, case, why):
    doc = tmp_path / "doc.txt"
    if case == "large":
        with open(doc, "wb") as f:
            f.truncate(MAX_INPUT_FILE + 1)          # sparse: refused by its size, never read
    elif case == "binary":
        doc.write_bytes(b"abc\xff\xfe")
    elif case == "empty":
        doc.write_bytes(b"")
    elif case == "directory":
        doc.mkdir()
    path = scenario(tmp_path)
    for argv in (["validate", str(path)], ["record", str(path), "-o", str(tmp_path / "o.trace")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"{path}:4:15: {why}"), (argv, err)
    assert not (tmp_path / "o.trace").exists()


def test_the_checks_count_the_files_tokens(tmp_path):
    (tmp_path / "doc.txt").write_text("short", encoding="utf-8")
    path = scenario(tmp_path, prefill=5)
    with pytest.raises(ScenarioError) as e:
        load(path)
    assert [str(p) for p in e.value.problems] == [
        f"{path}:5:21: decoding.prefill: prefill 5 leaves no input to step through (the text is 5 tokens)"]


def test_a_served_scenario_reads_no_file_outside_the_root(tmp_path, monkeypatch):
    (tmp_path / "root").mkdir()
    (tmp_path / "secret.txt").write_text("a secret", encoding="utf-8")
    path = scenario(tmp_path / "root", "../secret.txt")
    load(path)                                       # in a terminal the user may name any file
    monkeypatch.setenv("LINEAGE_SERVE_ROOT", str(tmp_path / "root"))
    with pytest.raises(ScenarioError, match="input.file: outside the served root"):
        load(path)


def test_the_prefill_reports_its_progress_chunk_by_chunk(tmp_path):
    (tmp_path / "doc.txt").write_text("abcdefgh" * 1200, encoding="utf-8")     # 9,600 tokens
    seen = []
    with reporting_prefill(lambda label, done, total: seen.append((label, done, total))):
        s = Session(load(scenario(tmp_path, prefill=9_590)), device="cpu")
    assert seen == [("tiny-hybrid", 0, 9590), ("tiny-hybrid", 4096, 9590), ("tiny-hybrid", 8192, 9590),
                    ("tiny-hybrid", 9590, 9590)]
    assert s.total == 10 and s.frame(0).token().pos == 9590
    s.close()
    own = []                                           # a session's own callback comes first
    Session(load(scenario(tmp_path, prefill=5_000)), device="cpu",
            prefill_progress=lambda *a: own.append(a[1])).close()
    assert own == [0, 4096, 5000]


def test_the_app_opening_a_long_input_shows_the_prefill_on_its_loading_screen(tmp_path, monkeypatch):
    from lineage.cli.loader import open_for_app
    monkeypatch.setenv("LINEAGE_CACHE_DIR", str(tmp_path / "cache"))   # the trace cache on: the app's way
    (tmp_path / "doc.txt").write_text("abcdefgh" * 1200, encoding="utf-8")
    stages = []
    cursor = open_for_app(str(scenario(tmp_path, prefill=9_590)), False, stages.append)
    reading = [s for s in stages if "reading the prompt" in s]
    assert reading[0] == "tiny-hybrid: reading the prompt, 9,590 tokens"
    assert [r.split(", ")[1].split(" (")[0] for r in reading[1:]] == \
        ["4,096 of 9,590 tokens", "8,192 of 9,590 tokens", "9,590 of 9,590 tokens"]
    assert all(r.endswith(" tokens/s)") for r in reading[1:])
    cursor.close()


def test_a_frame_after_a_long_prefill_costs_what_one_after_a_short_one_does(tmp_path):
    """Only the softmax attention rows (one weight per cached position and head: the row the step's
    read of the cache makes anyway) grow with what was prefilled (a state's rows cover the steps
    observed, the prefill is their "before" share); every other array and the meta are
    the same size after 9,590 tokens as after 10."""
    (tmp_path / "doc.txt").write_text("abcdefgh" * 1200, encoding="utf-8")
    frames = {}
    for prefill in (10, 9_590):
        s = Session(load(scenario(tmp_path, prefill=prefill)), device="cpu")
        frames[prefill] = s.frame(3)
        s.close()
    short, long = frames[10], frames[9_590]
    assert short.arrays.keys() == long.arrays.keys()
    for key, a in long.arrays.items():
        if key.endswith("/attn") and key + "_before" not in long.arrays:     # a cache's softmax rows
            assert a.shape == (2, 9_590 + 4) and short.arrays[key].shape == (2, 14)
        else:
            assert a.nbytes == short.arrays[key].nbytes, key
    grown = len(long.to_bytes()) - len(short.to_bytes())
    assert grown <= 2 * 2 * 9_580 + 64          # float16 rows of 2 heads, and a few digits more in the meta


def test_the_app_reads_an_input_file_edited_since_its_last_opening(tmp_path, monkeypatch):
    from lineage.cli.loader import open_for_app
    monkeypatch.setenv("LINEAGE_CACHE_DIR", str(tmp_path / "cache"))
    path = scenario(tmp_path)
    for text in ("aaaaaaaaaa", "bbbbbbbbbb"):            # the scenario's text stays the same
        (tmp_path / "doc.txt").write_text(text, encoding="utf-8")
        cursor = open_for_app(str(path), False, lambda _: None)
        assert cursor.frame(2).token().text == text[0]
        cursor.close()


def test_a_checkpoint_read_far_keeps_the_attention_rows_of_its_panels_layers_only(tmp_path):
    """Every layer's attention rows at 4M positions would be 16 MB a frame: past the budget a
    checkpoint's frames keep what its panels show (here the state panel's layer 0)."""
    from lineage.presets import get_preset
    (tmp_path / "doc.txt").write_text("abcdefgh", encoding="utf-8")
    sc = load(scenario(tmp_path))
    cfg = get_preset("tiny-hybrid")
    assert runners._watched(sc, 0, cfg, 1 << 20) is None                 # 4 MB of rows: all layers
    assert runners._watched(sc, 0, cfg, 1 << 22) == frozenset()          # tokens and cache panels: none


def test_the_loading_screen_says_how_far_and_how_fast():
    from lineage.cli.loader import prefill_progress
    said, now = [], [100.0]
    report = prefill_progress(said.append, clock=lambda: now[0])
    report("kimi", 0, 131_072)
    now[0] += 3.33
    report("kimi", 40_960, 131_072)
    assert said == ["kimi: reading the prompt, 131,072 tokens",
                    "kimi: reading the prompt, 40,960 of 131,072 tokens (12,300 tokens/s)"]


def test_a_prompt_that_cannot_fit_is_one_line_before_it_is_read(tmp_path, monkeypatch, capsys):
    (tmp_path / "doc.txt").write_text("abcdefgh" * 1200, encoding="utf-8")
    path = scenario(tmp_path, prefill=9_590)
    monkeypatch.setattr(runners, "free_bytes", lambda device: 5 << 20)
    read = []
    with pytest.raises(MemoryRefused) as e:
        Session(load(path), device="cpu", prefill_progress=lambda *a: read.append(a))
    assert read == []                                  # refused before the first chunk
    assert str(e.value) == ("doc.txt: 9,600 tokens need 1.5 MiB of cache and state and 220.1 MiB of "
                            "activations; this machine has 5.0 MiB free")
    assert main(["record", str(path), "-o", str(tmp_path / "o.trace")]) == 2
    assert capsys.readouterr().err.splitlines() == [str(e.value)]
    from lineage.cli.loader import Unopened, open_for_app
    monkeypatch.setenv("LINEAGE_CACHE_DIR", "off")
    with pytest.raises(Unopened) as u:                 # the app's dialog: that line, no traceback
        open_for_app(str(path), False, lambda text: None)
    assert u.value.lines == [str(e.value)]
    monkeypatch.setattr(runners, "free_bytes", lambda device: 1 << 40)
    Session(load(path), device="cpu").close()


def test_free_memory_is_known_on_this_cpu():
    import torch
    free = runners.free_bytes(torch.device("cpu"))
    assert free is None if not os.path.exists("/proc/meminfo") else free > 0


def test_the_bundled_long_document_steps_from_the_end_of_its_file():
    sc = load(ROOT / "lineage" / "scenarios" / "long_document.yaml")
    assert len(sc.input.text.encode()) == 6185 and sc.decoding.prefill == 6121
    s = Session(sc, device="cpu")
    assert s.total == 64 and "prefilled 6,121 of 6,185 tokens" in s.info["notes"]
    from lineage.app.panels import render
    for step, caption in ((0, sc.captions[0]), (63, sc.captions[1])):
        cache = render(s, step, "cache")
        for said in ("6,122 tokens cached" if step == 0 else "6,185 tokens", "956.6 KiB" if step == 0 else
                     "966.4 KiB", "30.8 KiB"):
            assert said in caption.text
            assert said.replace(",", "").replace(" cached", "") in cache.replace(",", ""), (step, said, cache)
    s.close()


BOUNDED = """
import resource, sys
import torch
from lineage.model import LM
from lineage.presets import get_preset
from lineage.prefill import prefill
import dataclasses
torch.manual_seed(0)
T = int(sys.argv[1])
cfg = get_preset(sys.argv[2])                   # tiny-hybrid: Kimi Linear's layout, 3 KDA : 1 MLA, MoE
if cfg.n_positions and cfg.n_positions < T:
    cfg = dataclasses.replace(cfg, n_positions=T)   # GPT-2's learned positions, as many as the prompt
model = LM(cfg).eval()
ids = torch.randint(0, cfg.vocab_size, (1, T))
with torch.inference_mode():
    model(ids[:, :64], None, last=True)         # allocator and kernels warmed up
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
done = []
logits, state = prefill(model, ids, progress=lambda d, n: done.append(d))
assert done == list(range(4096, T + 1, 4096)) and torch.isfinite(logits).all()
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024)
"""


@pytest.mark.parametrize("preset", ["tiny-hybrid", "tiny-softmax"])
def test_a_16k_prefill_stays_in_bounded_memory(preset):
    """The peak resident memory a 16K-token prefill adds (measured in a process of its own) is
    under 400 MB, for Kimi Linear's layout (tiny-hybrid) and GPT-2's (tiny-softmax, learned
    positions, a KV cache): one 4,096 x 16,384 float32 score matrix of tiny-hybrid's two MLA
    heads would be 512 MB, of tiny-softmax's four 1 GB, the whole 16K x 16K one 2-4 GB. Measured
    on the 2-core dev box: tiny-hybrid 182 MB (the same at 32K; with attention computed as
    softmax(q k^T) v in place of fused SDPA, 4.7 GB), tiny-softmax 155 MB (1.2 GB unfused)."""
    env = dict(os.environ, OMP_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", BOUNDED, "16384", preset], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    grown = int(out.stdout.split()[-1])
    assert grown < 400e6, f"the prefill peaked {grown / 1e6:.0f} MB above its start"
