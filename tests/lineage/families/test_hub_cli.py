"""`lineage run / record / snapshot / validate / memory / params ORG/NAME`: a hub id opens from the
local Hugging Face cache as its snapshot folder would, offline; what is not there, or is hostile,
is one line, exit 2."""
import os
import shutil

import pytest

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from lineage.cli.main import main  # noqa: E402
from lineage.playback.session import Replay  # noqa: E402

from .test_gpt2 import gpt2  # noqa: E402
from .test_hub import MAIN, OLDER  # noqa: E402
from .test_scenarios import tokenizer  # noqa: E402

ID = "org/tiny-gpt2"


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("ck") / "tiny-gpt2"
    gpt2(path, vocab_size=300, n_positions=256)
    tokenizer(path)
    return path


def cached(cache, ckpt, repo_id=ID, commit=MAIN, ref="main"):
    """`ckpt` put in the cache as the hub puts a download: each file a blob, linked from the
    snapshot folder of `commit`, and refs/<ref> naming it."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for f in ckpt.iterdir():
        blob = repo / "blobs" / f"{commit[:8]}-{f.name}"
        shutil.copy(f, blob)
        (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / ref).write_text(commit)
    return repo


@pytest.fixture
def cache(tmp_path, monkeypatch, ckpt):
    root = tmp_path / "hub"
    for var in ("HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.chdir(tmp_path)
    cached(root, ckpt)
    return root


def one_line(capsys, *words) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    for w in words:
        assert w in err[0], err[0]
    return err[0]


def tokens(trace) -> list[str]:
    r = Replay(trace)
    try:
        return [r.frame(i).token().text for i in range(r.total)]
    finally:
        r.close()


def test_record_from_the_id_is_the_record_from_its_folder(cache, ckpt, tmp_path):
    assert main(["record", ID, "--text", "the cat sat", "-o", "hub.trace", "--steps", "4"]) == 0
    assert main(["record", str(ckpt), "--text", "the cat sat", "-o", "dir.trace", "--steps", "4"]) == 0
    assert tokens(tmp_path / "hub.trace") == tokens(tmp_path / "dir.trace")
    r = Replay(tmp_path / "hub.trace")
    assert r.info["models"][0]["pretrained"] == str((cache / "models--org--tiny-gpt2" / "snapshots" / MAIN).resolve())
    r.close()
    assert main(["record", ID, "--ids", "5,6,7", "-o", "ids.trace", "--steps", "2"]) == 0
    (tmp_path / "doc.txt").write_text("a fact is a fact", encoding="utf-8")
    assert main(["record", ID, "--text-file", "doc.txt", "-o", "file.trace", "--steps", "2"]) == 0
    assert tokens(tmp_path / "file.trace")[0] == "a"


def test_run_opens_the_app_on_the_ids_scenario(cache, monkeypatch):
    import lineage.app.app as app
    opened = []
    monkeypatch.setattr(app, "run", lambda path, salvage=False: opened.append(path) or 0)
    assert main(["run", ID, "--ids", "1,2,3"]) == 0
    assert len(opened) == 1 and opened[0].endswith("tiny-gpt2.yaml")
    assert f"pretrained: {(cache / 'models--org--tiny-gpt2' / 'snapshots' / MAIN).resolve()}" in \
        open(opened[0], encoding="utf-8").read()


def test_validate_memory_params_and_snapshot_take_the_id(cache, ckpt, capsys):
    assert main(["validate", ID]) == 0
    assert main(["memory", ID, "--context", "64"]) == 0
    hub = capsys.readouterr().out
    assert main(["memory", str(ckpt), "--context", "64"]) == 0
    # the same numbers; the checkpoint is named by its cache folder, as a models--org--name folder was
    assert hub == capsys.readouterr().out.replace("tiny-gpt2:", "models--org--tiny-gpt2:")
    assert main(["params", ID]) == 0
    assert "parameters" in capsys.readouterr().out
    assert main(["snapshot", ID, "--ids", "5,6,7", "--step", "2", "--panel", "tokens", "-o", "-"]) == 0
    assert "next:" in capsys.readouterr().out


def test_revision_by_branch_tag_and_commit(cache, ckpt, tmp_path, capsys):
    # an older snapshot of another width: which one opened shows in the parameter count
    older = tmp_path / "older"
    gpt2(older, vocab_size=300, n_positions=256, n_embd=24)
    tokenizer(older)
    cached(cache, older, commit=OLDER, ref="v1")
    counts = {}
    for rev in (None, "main", "v1", OLDER, MAIN):
        assert main(["params", ID, "--json"] + (["--revision", rev] if rev else [])) == 0
        counts[rev] = capsys.readouterr().out
    assert counts[None] == counts["main"] == counts[MAIN] != counts["v1"] == counts[OLDER]
    assert main(["record", ID, "--revision", "v1", "--ids", "1,2", "-o", "v1.trace", "--steps", "2"]) == 0
    assert main(["validate", ID, "--revision", OLDER]) == 0


def test_an_id_not_in_the_cache_is_one_line_naming_where_it_looked(cache, capsys):
    for command in (["run", "org/absent"], ["record", "org/absent", "-o", "t.trace"], ["validate", "org/absent"],
                    ["snapshot", "org/absent", "--step", "1", "-o", "-"]):
        assert main(command) == 2
        one_line(capsys, "org/absent: no such file", str(cache / "models--org--absent"), "HF_HUB_CACHE",
                 "hf download org/absent")
    assert main(["memory", "org/absent"]) == 2
    one_line(capsys, str(cache / "models--org--absent"))
    assert main(["run", ID, "--revision", "nope"]) == 2
    one_line(capsys, "no refs/nope", "hf download org/tiny-gpt2 --revision nope")
    assert not os.path.exists("t.trace")


def test_revision_applies_to_a_hub_id_only(cache, ckpt, capsys):
    assert main(["record", str(ckpt), "--revision", "main", "-o", "t.trace"]) == 2
    one_line(capsys, "--revision applies to a hub id")
    assert main(["validate", "recall", "--revision", "main"]) == 2
    one_line(capsys, "recall: --revision applies to a hub id")


@pytest.mark.parametrize("spoil, words", [
    (lambda ref: ref.write_text("../../../../tmp"), "not a commit id"),
    (lambda ref: (ref.unlink(), os.mkfifo(ref)), "FIFO"),
    (lambda ref: (ref.unlink(), ref.symlink_to("/dev/zero")), "character device"),
])
def test_a_hostile_ref_is_one_line_for_every_command(cache, capsys, spoil, words):
    spoil(cache / "models--org--tiny-gpt2" / "refs" / "main")
    for command in (["run", ID], ["record", ID, "-o", "t.trace"], ["validate", ID], ["memory", ID]):
        assert main(command) == 2
        one_line(capsys, words, "refs/main")


def test_existing_paths_and_bundled_names_are_unchanged(cache, tmp_path, capsys):
    """A folder named like an id is the folder; bundled names and mistyped files read as before."""
    assert main(["validate", "recall", "scenarios/recall.yaml"]) == 0
    assert main(["run", "recal"]) == 2
    assert one_line(capsys) == "recal: no such file (did you mean 'recall'?)"
    assert main(["validate", "org/absent.yaml"]) == 2
    assert "models--" not in capsys.readouterr().err
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "tiny-gpt2").mkdir()          # a local folder of that name, not a checkpoint
    assert main(["validate", ID]) == 2
    one_line(capsys, "no config.json")
