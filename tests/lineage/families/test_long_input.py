"""`lineage run / record DIR --text-file FILE` (and `-` for stdin): a long document through a
checkpoint's tokenizer, prefilled up to its last 32 tokens by default (and said so), the file's
problems one line each."""
import io
import random
import sys

import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from lineage.playback.session import Replay  # noqa: E402
from lineage.families.scenario import GENERATE, TAIL  # noqa: E402
from lineage.scenario import loads  # noqa: E402
from lineage.scenario.problems import ScenarioError  # noqa: E402
from lineage.cli.main import main  # noqa: E402

from .test_hybrids import kimi  # noqa: E402
from .test_scenarios import tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("ck") / "kimi-tiny"
    kimi(path, vocab_size=300)
    tokenizer(path)
    return path


def document(path, words: int):
    rng = random.Random(0)
    path.write_text(" ".join(rng.choice("the cat sat on the mat a fact is".split()) for _ in range(words)),
                    encoding="utf-8")
    return path


def tokens_of(ckpt, path) -> int:
    from lineage.families.tokenizer import tokenizer_for
    return len(tokenizer_for(ckpt).encode(path.read_text(encoding="utf-8")))


def recorded(ckpt, tmp_path, *flags) -> Replay:
    out = tmp_path / "run.trace"
    assert main(["record", str(ckpt), *flags, "-o", str(out), "--force"]) == 0
    return Replay(out)


def test_a_long_file_is_prefilled_up_to_its_last_tokens_and_says_so(ckpt, tmp_path):
    doc = document(tmp_path / "paper.txt", 1200)
    n = tokens_of(ckpt, doc)
    r = recorded(ckpt, tmp_path, "--text-file", str(doc))
    assert n > 256 and r.total == TAIL + GENERATE
    first, last_input = r.frame(0), r.frame(TAIL - 1)
    assert first.token().pos == n - TAIL and first.token().source == "input"
    assert last_input.token().pos == n - 1 and r.frame(TAIL).token().source == "greedy"
    assert f"prefilled {n - TAIL:,} of {n:,} tokens" in r.info["notes"]
    assert f"first {n - TAIL:,} of {n:,} tokens are read at once" in r.info["description"]
    r.close()


def test_stdin_reads_as_a_file_does(ckpt, tmp_path, monkeypatch):
    doc = document(tmp_path / "paper.txt", 1200)
    n = tokens_of(ckpt, doc)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(doc.read_bytes())))
    r = recorded(ckpt, tmp_path, "--text-file", "-")
    assert r.total == TAIL + GENERATE and r.frame(0).token().pos == n - TAIL
    assert f"prefilled {n - TAIL:,} of {n:,} tokens" in r.info["notes"]
    r.close()


def test_a_short_file_steps_from_its_first_token(ckpt, tmp_path):
    doc = tmp_path / "short.txt"
    doc.write_text("the cat sat on the mat", encoding="utf-8")
    r = recorded(ckpt, tmp_path, "--text-file", str(doc), "--prefill", "2")
    assert r.frame(0).token().pos == 2 and "prefilled 2 of 6 tokens" in r.info["notes"]
    r.close()
    r = recorded(ckpt, tmp_path, "--text-file", str(doc))
    assert r.frame(0).token().pos == 0 and not any("prefilled" in n for n in r.info["notes"])
    r.close()


@pytest.mark.parametrize("flags, said", [
    (["--text-file", "nowhere.txt"], "--text-file nowhere.txt: no such file"),
    (["--text-file", "BINARY"], "--text-file BINARY: not UTF-8 text (byte 2, line 1, column 3)"),
    (["--text-file", "DOC", "--text", "hi"], "give one of --text, --text-file or --ids"),
    (["--text-file", "DOC", "--prefill", "99999"], "--prefill 99999: the input is"),
    (["--prefill", "-1"], "--prefill -1: expected a number of tokens >= 0"),
])
def test_what_cannot_be_the_input_is_one_line(ckpt, tmp_path, monkeypatch, capsys, flags, said):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "BINARY").write_bytes(b"ab\xffcd")
    document(tmp_path / "DOC", 10)
    for command in (["run", str(ckpt)], ["record", str(ckpt), "-o", "o.trace"]):
        assert main(command + flags) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(said), (command, err)
    assert not (tmp_path / "o.trace").exists()


def test_a_scenarios_text_file_is_read_before_anything_runs(capsys):
    """--text-file takes a scenario too (its models on that text); a file that cannot be read
    is one line, before any model is built."""
    assert main(["run", "scenarios/tour.yaml", "--text-file", "x.txt"]) == 2
    assert capsys.readouterr().err.strip() == "--text-file x.txt: no such file"


def test_a_files_text_problem_is_said_at_input_file(tmp_path):
    kimi(tmp_path / "m")                               # no tokenizer files: text cannot be read
    (tmp_path / "doc.txt").write_text("the cat", encoding="utf-8")
    text = f"version: 1\ntitle: t\nmodel: {{pretrained: {tmp_path / 'm'}}}\ninput: {{file: doc.txt}}\n"
    with pytest.raises(ScenarioError) as e:
        loads(text, "s.yaml", base_dir=tmp_path)
    assert "s.yaml:4:15: input.file: m has no tokenizer files (tokenizer.json): give the input as ids" in \
        [str(p) for p in e.value.problems]


def test_a_file_longer_than_learned_positions_is_one_line(tmp_path, capsys):
    from .test_gpt2 import gpt2
    gpt2(tmp_path / "g", vocab_size=300, n_positions=64)
    tokenizer(tmp_path / "g")
    doc = document(tmp_path / "paper.txt", 200)
    n = tokens_of(tmp_path / "g", doc)
    capsys.readouterr()
    assert main(["record", str(tmp_path / "g"), "--text-file", str(doc), "-o", str(tmp_path / "o.trace")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"--text-file {doc}: {n:,} tokens; g has learned positions for 64, the input and the 32 tokens "
        "generated after it"]
