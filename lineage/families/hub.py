"""A Hugging Face hub id (`Qwen/Qwen3.5-0.8B`) opened from the local cache, offline, where
`from_pretrained(id, local_files_only=True)` would find it: the snapshot folder
`CACHE/models--Qwen--Qwen3.5-0.8B/snapshots/<commit>/` that `refs/main` (or `refs/<revision>`)
names. Nothing is ever downloaded; an id not in the cache is one line naming where we looked and
the command that downloads it.

The cache is found by huggingface_hub's own rule (HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE,
else HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub), read
here from the environment at each call rather than from `huggingface_hub.constants`: those are
fixed when that module is first imported, and the core install has no huggingface_hub at all.
tests/lineage/families/test_hub.py checks the rule against the installed library's.

A ref file is an input like any other: read bounded through lineage.files (a FIFO or a link to
/dev/zero is refused before a byte is read), and what it holds must be a commit id, 40 or 64
lowercase hex digits, before it names a folder; the snapshot it names must be a folder directly
under the repository's own `snapshots/` once links are resolved (its files may link into
`blobs/`, as the hub's always do). Torch-free.
"""
from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

from ..files import read_regular
from .problems import PretrainedError

# org/name as the hub spells them: letters, digits, - _ . (96 at most each), exactly one slash
_ID = re.compile(r"[A-Za-z0-9_.-]{1,96}/[A-Za-z0-9_.-]{1,96}")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")       # git's sha-1, or sha-256
# a branch or tag as the hub stores its ref file (`main`, `v1.0`, `refs/pr/1`); `..` parts are refused
_REVISION = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")
REF_BYTES = 256          # a ref holds one commit id, 64 characters at most: more is not a ref
# an argument ending so is a file lineage reads (a mistyped scenario or trace), never a hub id
_FILE_SUFFIXES = (".yaml", ".yml", ".trace", ".json", ".safetensors")


def is_hub_id(text: str) -> bool:
    """Whether `text` is spelled as a hub id: `org/name`, neither part hidden (`.x`) nor holding
    `..`, and not the name of a file lineage reads. Whether it is also a path is the caller's
    question (hub_id)."""
    org, _, name = text.partition("/")
    return (_ID.fullmatch(text) is not None and ".." not in text and not org.startswith(".")
            and not name.startswith(".") and not text.lower().endswith(_FILE_SUFFIXES))


def hub_id(target: str) -> str | None:
    """`target` when the command line should look for it in the hub cache: not an existing path,
    not a bundled scenario (`tour`, `scenarios/tour.yaml`), and spelled as a hub id."""
    from ..scenarios import resolve
    if Path(target).expanduser().exists() or resolve(target) != target:
        return None
    return target if is_hub_id(target) else None


def cache_root() -> tuple[Path, str]:
    """(the hub cache folder, which setting chose it), by huggingface_hub's rule, read now."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if var in os.environ:
            return _expanded(os.environ[var]), var
    if "HF_HOME" in os.environ:
        return _expanded(os.environ["HF_HOME"]) / "hub", "HF_HOME/hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg is not None else os.path.join(os.path.expanduser("~"), ".cache")
    return _expanded(base) / "huggingface" / "hub", "the default cache"


def _expanded(value: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(value)))


def find_snapshot(repo_id: str, revision: str | None = None) -> Path:
    """The cached snapshot folder of `repo_id` at `revision` (a branch or tag read from
    refs/, or a commit id itself; default main); PretrainedError, one line, when it is not in the
    cache or the cache's files are not what the hub writes."""
    if not is_hub_id(repo_id):       # callers ask hub_id first: a last net, a name never becomes a path
        raise PretrainedError(f"{repo_id[:200]}: not a hub id (org/name)")
    root, chosen = cache_root()
    repo = root / ("models--" + repo_id.replace("/", "--"))
    if not repo.is_dir():
        raise PretrainedError(f"{repo_id}: no such file, nor in the Hugging Face cache (looked in {repo}, from "
                              f"{chosen}); lineage never downloads: {_download(repo_id, revision)}")
    try:
        return snapshot_of(repo, "main" if revision is None else revision)
    except RefMissing as e:
        raise PretrainedError(f"{repo_id}: {e} in the Hugging Face cache ({repo}); "
                              f"{_download(repo_id, revision)}") from None


class RefMissing(PretrainedError):
    """A revision the cache folder does not hold (said with how to download it), not a broken one."""


def snapshot_of(repo: Path, revision: str = "main") -> Path:
    """The snapshot folder of a cache folder `models--org--name` at `revision`: a commit id names
    its snapshot directly, a branch or tag its ref file's commit. PretrainedError, one line."""
    if _COMMIT.fullmatch(revision):
        commit, named = revision, f"commit {revision}"
    else:
        commit, named = read_ref(repo, revision), f"refs/{revision}"
    snap = repo / "snapshots" / commit
    if not snap.is_dir():
        held = _held(repo)
        raise RefMissing(f"{named} names no snapshot ({'snapshots held: ' + held if held else 'no snapshots'})"
                       if named.startswith("refs/") else f"no snapshot of {named}")
    inside = (repo.resolve() / "snapshots")
    real = snap.resolve()
    if real.parent != inside:         # a link out of the repository: refused, never followed
        raise PretrainedError(f"{snap}: the snapshot folder resolves to {real}, outside {inside}; refused")
    return real


def read_ref(repo: Path, revision: str) -> str:
    """The commit id `refs/<revision>` holds, read bounded; PretrainedError (one line) for a
    revision that is no branch or tag name, a ref that is missing, not a regular file, too large,
    or anything but a commit id."""
    if len(revision) > 255 or not _REVISION.fullmatch(revision) or ".." in revision.split("/") \
            or "." in revision.split("/"):
        raise PretrainedError(f"--revision {revision[:80]!r}: not a branch, tag or commit id")
    ref = repo / "refs" / revision
    try:
        data = read_regular(ref, REF_BYTES)
    except FileNotFoundError:
        held = _held(repo)
        raise RefMissing(f"no refs/{revision}" + (f" (snapshots held: {held}; --revision COMMIT opens one)"
                                                if held else "")) from None
    except OSError as e:       # a FIFO, a device, a folder, past the bound: the reader's reason
        raise PretrainedError(f"{ref}: cannot be read as a ref ({e.strerror or type(e).__name__})") from None
    text = data.decode("ascii", errors="replace").strip()
    if not _COMMIT.fullmatch(text):
        raise PretrainedError(f"{ref}: not a commit id (40 or 64 lowercase hex digits): {text[:70]!r}")
    return text


def _held(repo: Path, most: int = 3) -> str:
    """The snapshots a cache folder holds, for a message: their first 12 hex digits."""
    try:
        names = sorted(p.name[:12] for p in (repo / "snapshots").iterdir() if _COMMIT.fullmatch(p.name))
    except OSError:
        return ""
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _download(repo_id: str, revision: str | None) -> str:
    """The command that fetches `repo_id` into the cache (huggingface_hub's, which the pretrained
    extra installs)."""
    rev = f" --revision {revision}" if revision else ""
    how = f"`hf download {repo_id}{rev}` (or `huggingface-cli download {repo_id}{rev}`)"
    if importlib.util.find_spec("huggingface_hub") is None:
        return f"pip install huggingface_hub, then {how} fetches it"
    return f"{how} fetches it"
