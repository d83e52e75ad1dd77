"""A checkpoint's own tokenizer, when its directory has one: `tokenizer.json` (or GPT-2's
`vocab.json` + `merges.txt`) through the `tokenizers` library. None when there is none (the
app then shows ids as ids and says so)."""
from __future__ import annotations

import functools
from pathlib import Path

from ..escapes import visible
from .problems import PretrainedError


class HFTokenizer:
    def __init__(self, tok, source: str):
        self.tok, self.source = tok, source
        self.vocab_size = tok.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=False)

    def token_str(self, i: int) -> str:
        """One token as readable text: its decoded string (a byte-level piece of a character falls
        back to the vocabulary's own spelling), control characters made visible."""
        s = self.decode([i])
        if not s or "\ufffd" in s:
            s = self.tok.id_to_token(int(i)) or f"<{int(i)}>"
        return visible(s, keep_newlines=False)


def load_tokenizer(root: Path) -> HFTokenizer | None:
    try:
        import tokenizers
    except ImportError:             # the library is optional: ids stay ids
        return None
    try:
        if (root / "tokenizer.json").is_file():
            return HFTokenizer(tokenizers.Tokenizer.from_file(str(root / "tokenizer.json")), "tokenizer.json")
        if (root / "vocab.json").is_file() and (root / "merges.txt").is_file():
            bpe = tokenizers.ByteLevelBPETokenizer(str(root / "vocab.json"), str(root / "merges.txt"))
            return HFTokenizer(bpe, "vocab.json + merges.txt")
    except Exception as e:  # noqa: BLE001  the library raises its own kinds for a broken file
        raise PretrainedError(f"{root}: its tokenizer files cannot be read ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    return None


@functools.lru_cache(maxsize=8)
def _cached(root: str, stamp: float) -> HFTokenizer | None:
    return load_tokenizer(Path(root))


def tokenizer_for(path) -> HFTokenizer | None:
    """The tokenizer of a checkpoint directory (hub cache folders too), read once per process:
    validate, the step count and the session all ask for it. None when there is none or the
    directory cannot be read (the loader says why, at its own place)."""
    from .loader import resolve_dir
    try:
        root = resolve_dir(path)
        stamp = max((root / n).stat().st_mtime for n in ("tokenizer.json", "vocab.json", "config.json")
                    if (root / n).exists())
        return _cached(str(root), stamp)
    except (PretrainedError, OSError, ValueError):
        return None
