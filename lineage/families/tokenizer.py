"""A checkpoint's own tokenizer, when its directory has one: `tokenizer.json` (or GPT-2's
`vocab.json` + `merges.txt`) through the `tokenizers` library, or Kimi's `tiktoken.model`
through `tiktoken`. None when there is none (the app then shows ids as ids and says so).

Tokenizer files are a stranger's too: each is read only when it is a regular file within its
limit, checked before a Rust library sees it (whose panics are BaseExceptions), and tried on a
probe text; a broken one is a PretrainedError naming the file, never taken for no tokenizer."""
from __future__ import annotations

import functools
import os
from pathlib import Path

from ..escapes import visible
from ..files import read_regular
from .hfconfig import read_json
from .problems import PretrainedError
from .shards import resolve_dir

# The most each tokenizer file may hold, a few times the largest published (Gemma 3's tokenizer.json
# is 33 MB; Kimi's tiktoken.model 2.8 MB; GPT-2's vocab.json 1 MB): a file past its limit is refused
# before it is read, so a lying folder cannot spend minutes and gigabytes in a parser.
LIMITS = {"tokenizer.json": 64 << 20, "tiktoken.model": 8 << 20, "tokenizer_config.json": 8 << 20,
          "vocab.json": 16 << 20, "merges.txt": 16 << 20}
# ... and what its parse may cost: a JSON file's object members (counted as its colons, before it is
# parsed) and a tiktoken.model's ranks, each about twice the largest published vocabulary (Gemma 3:
# 262,144). A tokenizer.json of 1.9M tiny entries, inside the byte limit, took 5.7 s and 785 MB;
# 1M tiktoken ranks 6.8 s and 620 MB; at these bounds about 1.3 s and 390 MB
MEMBERS = MAX_RANKS = 1 << 19


class HFTokenizer:
    def __init__(self, tok, source: str, path: Path | None = None):
        self.tok, self.source, self.path = tok, source, path or Path(source)
        self.vocab_size = tok.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        # a file can load and still fail on some text (an unk_token not in its vocabulary)
        return through_library(self.path, "tokenizers", lambda: list(self.tok.encode(text, add_special_tokens=False).ids))

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=False)

    def token_str(self, i: int) -> str:
        """One token as readable text: its decoded string (a byte-level piece of a character falls
        back to the vocabulary's own spelling), control characters made visible."""
        s = self.decode([i])
        if not s or "\ufffd" in s:
            s = self.tok.id_to_token(int(i)) or f"<{int(i)}>"
        return visible(s, keep_newlines=False)


# Kimi's pre-tokenizer (its published tiktoken pattern): runs of Han characters are words of their
# own, then cased letter runs with English contractions, up to three digits, punctuation, spaces
KIMI_PATTERN = "|".join([
    r"[\p{Han}]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])


def is_panic(e: BaseException) -> bool:
    """A Rust library's panic (pyo3_runtime.PanicException): a BaseException, so `except
    Exception` misses it, and not importable by name; told by its class name."""
    return type(e).__name__ == "PanicException"


def read_ranks(path: Path, data: bytes) -> dict[bytes, int]:
    """`base64-token rank` lines -> {token bytes: rank}, checked so that tiktoken's Rust core,
    which panics on what it does not expect (a repeated rank, a byte with no token of its own),
    never sees a bad one. Strict base64: the lenient decoder drops junk characters, so `@@@@`
    would be the empty token."""
    import base64
    import binascii
    ranks: dict[bytes, int] = {}
    seen: set[int] = set()
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            raise PretrainedError(f"{path}:{n}: expected a base64 token and a rank, got {_shown(line)}")
        try:
            token = base64.b64decode(parts[0], validate=True)
        except binascii.Error:
            raise PretrainedError(f"{path}:{n}: token {_shown(parts[0])} is not base64") from None
        rank = int(parts[1]) if len(parts[1]) < 10 else MAX_RANKS
        why = ("an empty token" if not token
               else f"rank {_shown(parts[1])} is out of range (lineage reads ranks below {MAX_RANKS:,})" if rank >= MAX_RANKS
               else f"token {_shown(parts[0])} is given twice" if token in ranks
               else f"rank {rank} is given twice" if rank in seen else None)
        if why:
            raise PretrainedError(f"{path}:{n}: {why}")
        ranks[token] = rank
        seen.add(rank)
    lone = next((b for b in range(256) if bytes([b]) not in ranks), None)
    if lone is not None:        # byte-level BPE starts from single bytes: text with this one cannot be encoded
        raise PretrainedError(f"{path}: byte {lone:#04x} has no token of its own (a byte-level BPE has all 256)")
    return ranks


def _shown(b: bytes) -> str:
    text = b.decode("utf-8", errors="backslashreplace")
    return repr(text if len(text) <= 40 else text[:37] + "...")


# text every tokenizer must encode and decode at its load: letters, digits, runs of spaces, a
# newline, accented and Han characters. A file that loads but fails on this (an unk_token missing
# from its vocabulary) is refused there, not at the first step
PROBE = "The capital of France is Paris, 1234.\n  caf\u00e9 \u6587\u5b57 ~"


def working(tok, path: Path, library: str):
    """`tok`, once it has encoded and decoded PROBE and shown a token."""
    through_library(path, library, lambda: (tok.decode(tok.encode(PROBE)), tok.token_str(0)))
    return tok


def through_library(path: Path, library: str, make):
    """`make()`, a library reading `path`; what it raises, a Rust panic included, as one line
    naming the file (KeyboardInterrupt and SystemExit pass)."""
    try:
        return make()
    except PretrainedError:
        raise
    except BaseException as e:
        if not isinstance(e, Exception) and not is_panic(e):
            raise
        raise PretrainedError(f"{path}: {library} refused it ({_why(e)})") from None


def present(path: Path) -> bool:
    """Whether the folder has this name at all: a link to nothing, a FIFO or /dev/zero counts, so
    that it is refused for what it is rather than taken for no tokenizer."""
    return os.path.lexists(path)


def read(path: Path) -> bytes:
    """A tokenizer file whole, within its LIMITS (and MEMBERS); PretrainedError naming it otherwise."""
    try:
        data = read_regular(path, LIMITS[path.name])
    except OSError as e:
        raise PretrainedError(f"{path}: cannot be read ({e.strerror or type(e).__name__})") from None
    if path.suffix == ".json" and data.count(b":") > MEMBERS:
        raise PretrainedError(f"{path}: over {MEMBERS:,} entries (lineage reads at most that many)")
    return data


def specials(path: Path, ranks: dict) -> dict[str, int]:
    """tokenizer_config.json's `added_tokens_decoder` ({"id": {"content": text}}) as {text: id},
    each id a number of its own past the BPE ranks' (tiktoken's core panics on a shared one)."""
    table = read_json(path, LIMITS[path.name], MEMBERS).get("added_tokens_decoder") or {}
    if not isinstance(table, dict):
        raise PretrainedError(f"{path}: added_tokens_decoder: expected an object of id -> token")
    taken, out = set(ranks.values()), {}
    for i, tok in table.items():
        content = tok.get("content") if isinstance(tok, dict) else None
        why = ("the id is not a number" if not (i.isascii() and i.isdecimal()) or len(i) > 9
               else "expected an object with a string content" if not isinstance(content, str)
               else "the id is a BPE rank's too" if int(i) in taken
               else "the token is given twice" if content in out else None)
        if why:
            raise PretrainedError(f"{path}: added_tokens_decoder: {i[:40]!r}: {why}")
        out[content] = int(i)
        taken.add(int(i))
    return out


class TiktokenTokenizer:
    """Kimi's tokenizer: BPE ranks from `tiktoken.model` (one `base64-bytes rank` a line), the
    special tokens named in `tokenizer_config.json`'s `added_tokens_decoder`."""

    def __init__(self, root: Path):
        import tiktoken
        ranks = read_ranks(root / "tiktoken.model", read(root / "tiktoken.model"))
        special = specials(root / "tokenizer_config.json", ranks) if present(root / "tokenizer_config.json") else {}
        self.enc = through_library(root / "tiktoken.model", "tiktoken", lambda: tiktoken.Encoding(
            name=root.name, pat_str=KIMI_PATTERN, mergeable_ranks=ranks, special_tokens=special))
        self.source, self.path = "tiktoken.model", root / "tiktoken.model"
        self.vocab_size = self.enc.n_vocab

    def encode(self, text: str) -> list[int]:
        # text that spells a special token is text; a panic of the Rust core is one line
        return through_library(self.path, "tiktoken", lambda: self.enc.encode(text, disallowed_special=()))

    def decode(self, ids) -> str:
        return self.enc.decode([int(i) for i in ids])

    def token_str(self, i: int) -> str:
        """One token as readable text; a piece of a UTF-8 character shows its bytes (\\xe4)."""
        try:
            raw = self.enc.decode_single_token_bytes(int(i))
        except KeyError:
            return f"<{int(i)}>"
        return visible(raw.decode("utf-8", errors="backslashreplace"), keep_newlines=False)


def load_tokenizer(root: Path) -> HFTokenizer | TiktokenTokenizer | None:
    """The folder's tokenizer, None when it has no tokenizer files (or the library that reads them
    is not installed); PretrainedError, one line naming the file, when one is there but broken."""
    try:
        if present(root / "tiktoken.model") and not present(root / "tokenizer.json"):
            try:
                return working(TiktokenTokenizer(root), root / "tiktoken.model", "tiktoken")
            except ImportError:     # the library is optional: ids stay ids
                return None
        try:
            import tokenizers
        except ImportError:
            return None
        if present(root / "tokenizer.json"):
            path = root / "tokenizer.json"
            text = _text(path, read(path))
            tok = through_library(path, "tokenizers", lambda: tokenizers.Tokenizer.from_str(text))
            return working(HFTokenizer(tok, "tokenizer.json", path), path, "tokenizers")
        if present(root / "vocab.json") and present(root / "merges.txt"):
            for name in ("vocab.json", "merges.txt"):    # checked to be regular and bounded; the library reads them
                read(root / name)
            bpe = through_library(root / "vocab.json", "tokenizers (with merges.txt)", lambda: (
                tokenizers.ByteLevelBPETokenizer(str(root / "vocab.json"), str(root / "merges.txt"))))
            return working(HFTokenizer(bpe, "vocab.json + merges.txt", root / "vocab.json"), root / "vocab.json",
                           "tokenizers (with merges.txt)")
    except PretrainedError:
        raise
    except BaseException as e:  # the libraries raise their own kinds for a broken file, Rust panics too
        if not isinstance(e, Exception) and not is_panic(e):
            raise                   # KeyboardInterrupt, SystemExit
        raise PretrainedError(f"{root}: its tokenizer files cannot be read ({_why(e)})") from None
    return None


def _text(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PretrainedError(f"{path}: not UTF-8 text (byte {e.start:,})") from None


def _why(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__


@functools.lru_cache(maxsize=8)
def _cached(root: str, stamp: float) -> HFTokenizer | None:
    return load_tokenizer(Path(root))


def tokenizer_for(path, strict: bool = False) -> HFTokenizer | TiktokenTokenizer | None:
    """The tokenizer of a checkpoint directory (hub cache folders too), read once per process:
    validate, the step count and the session all ask for it. None when there is none; for
    tokenizer files that are there but broken, None too (the loader says why, at its own place)
    or with `strict` their PretrainedError, for a caller that would otherwise say there are none."""
    try:
        root = resolve_dir(path)
        stamp = max(((root / n).stat().st_mtime for n in (*LIMITS, "config.json") if (root / n).exists()),
                    default=0.0)
        return _cached(str(root), stamp)
    except PretrainedError:
        if strict:
            raise
        return None
    except (OSError, ValueError):
        return None
