"""A hub id found in the local Hugging Face cache (lineage.families.hub): which cache, which
snapshot a ref or --revision names, and refs that are hostile refused in one line without ever
leaving the cache. Folders only: no checkpoint is loaded here (test_hub_cli.py loads them)."""
import json
import os
import subprocess
import sys

import pytest

from lineage.families import PretrainedError
from lineage.families.hub import REF_BYTES, cache_root, find_snapshot, hub_id, is_hub_id

MAIN = "0123456789abcdef0123456789abcdef01234567"          # the commit refs/main names
OLDER = "fedcba9876543210fedcba9876543210fedcba98"         # another snapshot, tagged v1
SHA256 = "ab" * 32                                         # a repository with sha-256 commit ids


def fake_repo(cache, repo_id="org/tiny", commits=(MAIN, OLDER), refs=None):
    """A cache folder as the hub writes it: snapshots/<commit>/config.json linked into blobs/,
    refs/main (and refs/v1) holding commit ids."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True)
    for c in commits:
        blob = repo / "blobs" / f"blob-{c[:8]}"
        blob.write_text(json.dumps({"model_type": "gpt2", "commit": c}))
        snap = repo / "snapshots" / c
        snap.mkdir(parents=True)
        (snap / "config.json").symlink_to(os.path.relpath(blob, snap))
    (repo / "refs").mkdir()
    for name, commit in (refs if refs is not None else {"main": MAIN, "v1": OLDER}).items():
        (repo / "refs" / name).write_text(commit)
    return repo


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    for var in ("HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    return root


def refused(repo_id="org/tiny", revision=None, *words):
    with pytest.raises(PretrainedError) as e:
        find_snapshot(repo_id, revision)
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg
    return msg


@pytest.mark.parametrize("text, ok", [
    ("Qwen/Qwen3.5-0.8B", True), ("moonshotai/Kimi-Linear-48B-A3B-Instruct", True), ("gpt2/x_y", True),
    ("gpt2", False), ("a/b/c", False), ("../x", False), ("org/..", False), ("org/a..b", False), (".x/y", False),
    ("org/.hidden", False), ("org/na me", False), ("/abs", False), ("org/", False), ("org/x.yaml", False),
    ("org/x.trace", False), ("org/n\u00e9", False), ("o" * 97 + "/x", False),
])
def test_what_is_spelled_as_a_hub_id(text, ok):
    assert is_hub_id(text) is ok


def test_paths_and_bundled_names_stay_what_they_were(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "model").mkdir()
    assert hub_id("org/model") is None                       # a folder here: a directory, as before
    assert hub_id("scenarios/tour.yaml") is None and hub_id("tour") is None
    assert hub_id("org/other") == "org/other"


def test_the_ref_names_the_snapshot(cache):
    repo = fake_repo(cache)
    assert find_snapshot("org/tiny") == (repo / "snapshots" / MAIN).resolve()
    assert find_snapshot("org/tiny", "v1") == (repo / "snapshots" / OLDER).resolve()       # a tag, from refs/
    assert find_snapshot("org/tiny", OLDER) == (repo / "snapshots" / OLDER).resolve()      # a commit, directly
    sha = fake_repo(cache, "org/sha", commits=(SHA256,), refs={"main": SHA256 + "\n"})    # a newline is allowed
    assert find_snapshot("org/sha") == (sha / "snapshots" / SHA256).resolve()


def test_an_id_not_in_the_cache_says_where_it_looked(cache):
    msg = refused("Qwen/Qwen3.5-0.8B", None, f"{cache / 'models--Qwen--Qwen3.5-0.8B'}", "HF_HUB_CACHE",
                  "hf download Qwen/Qwen3.5-0.8B", "huggingface-cli download Qwen/Qwen3.5-0.8B")
    assert msg.startswith("Qwen/Qwen3.5-0.8B: ")
    fake_repo(cache)
    refused("org/tiny", "dev", "no refs/dev", "--revision COMMIT", MAIN[:12], "hf download org/tiny --revision dev")
    refused("org/tiny", "1" * 40, f"no snapshot of commit {'1' * 40}")


def test_without_huggingface_hub_the_line_says_what_to_install(cache, monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "huggingface_hub"
                        else real(name, *a))
    refused("org/tiny", None, "pip install huggingface_hub, then `hf download org/tiny`")


def test_the_cache_is_chosen_as_huggingface_hub_chooses_it(tmp_path, monkeypatch):
    """HF_HUB_CACHE, else HF_HOME/hub, else the default (XDG_CACHE_HOME or ~/.cache)/huggingface/hub."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == (tmp_path / "home" / ".cache" / "huggingface" / "hub", "the default cache")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    assert cache_root() == (tmp_path / "hfhome" / "hub", "HF_HOME/hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hubcache"))
    assert cache_root() == (tmp_path / "hubcache", "HF_HUB_CACHE")
    # the same repository in all three: the first that the rule names is the one opened
    for place in (tmp_path / "hubcache", tmp_path / "hfhome" / "hub", tmp_path / "home" / ".cache/huggingface/hub"):
        fake_repo(place)
    assert str(find_snapshot("org/tiny")).startswith(str((tmp_path / "hubcache").resolve()))
    monkeypatch.delenv("HF_HUB_CACHE")
    assert str(find_snapshot("org/tiny")).startswith(str((tmp_path / "hfhome").resolve()))
    monkeypatch.delenv("HF_HOME")
    assert str(find_snapshot("org/tiny")).startswith(str((tmp_path / "home").resolve()))


@pytest.mark.parametrize("env", [
    {}, {"XDG_CACHE_HOME": "/x/xdg"}, {"HF_HOME": "~/hf"}, {"HF_HOME": "/h", "XDG_CACHE_HOME": "/x"},
    {"HUGGINGFACE_HUB_CACHE": "/legacy", "HF_HOME": "/h"}, {"HF_HUB_CACHE": "/new", "HUGGINGFACE_HUB_CACHE": "/old"},
    {"HF_HUB_CACHE": "$HOME/c", "HF_HOME": "/h"},
])
def test_the_rule_is_huggingface_hubs_own(env, tmp_path):
    """Ours against the installed huggingface_hub's constants, each in a fresh process (they are
    fixed at its import)."""
    pytest.importorskip("huggingface_hub")
    clean = {k: v for k, v in os.environ.items()
             if k not in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")}
    code = ("import huggingface_hub.constants as c; from lineage.families.hub import cache_root; "
            "print(c.HF_HUB_CACHE); print(cache_root()[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**clean, "HOME": str(tmp_path), **env}, cwd=os.getcwd())
    assert out.returncode == 0, out.stderr
    theirs, ours = out.stdout.splitlines()
    assert os.path.normpath(theirs) == os.path.normpath(ours)


# -- hostile refs: one line, and no folder outside the cache is ever opened -----------------------

def _sparse(path):
    with open(path, "wb") as f:
        f.truncate(1 << 30)


def _link(target):
    def spoil(path):
        path.unlink()
        path.symlink_to(target)
    return spoil


@pytest.mark.parametrize("spoil, words", [
    (_sparse, (f"limit {REF_BYTES}", "refs/main")),
    (lambda p: (p.unlink(), os.mkfifo(p)), ("FIFO",)),
    (_link("/dev/zero"), ("character device",)),
    (lambda p: p.write_text("not a commit"), ("not a commit id", "'not a commit'")),
    (lambda p: p.write_text("../../.."), ("not a commit id", "'../../..'")),
    (lambda p: p.write_text("/etc"), ("not a commit id",)),
    (lambda p: p.write_text(MAIN.upper()), ("not a commit id",)),
    (lambda p: p.write_text(MAIN[:39]), ("not a commit id",)),
    (lambda p: p.write_bytes(b"\x1b[2J" + MAIN.encode()), ("not a commit id", "\\x1b")),
    (lambda p: (p.unlink(), p.mkdir()), ("directory",)),
])
def test_a_hostile_ref_is_refused_in_one_line(cache, spoil, words):
    repo = fake_repo(cache)
    spoil(repo / "refs" / "main")
    msg = refused("org/tiny", None, *words)
    assert msg.startswith(str(repo / "refs" / "main") + ": ")


def test_a_snapshot_linked_out_of_the_cache_is_refused(cache, tmp_path):
    repo = fake_repo(cache, commits=(OLDER,), refs={"main": MAIN})
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    (repo / "snapshots" / MAIN).symlink_to(outside)
    refused("org/tiny", None, "outside", "refused")
    refused("org/tiny", MAIN, "outside")


@pytest.mark.parametrize("revision", ["../../../etc", "..", "main/../v1", "/etc/passwd", "a b", "", "."])
def test_a_revision_is_never_a_path(cache, revision):
    fake_repo(cache)
    refused("org/tiny", revision, "--revision", "not a branch, tag or commit id")


def test_a_cache_folder_given_as_a_directory_reads_its_ref_as_strictly(cache):
    """`lineage run models--org--tiny` (the folder itself, as before): refs/main read the same way."""
    from lineage.families.shards import resolve_dir
    repo = fake_repo(cache)
    assert resolve_dir(repo) == (repo / "snapshots" / MAIN).resolve()
    (repo / "refs" / "main").unlink()
    (repo / "refs" / "main").symlink_to("/dev/zero")
    with pytest.raises(PretrainedError, match="character device"):
        resolve_dir(repo)
