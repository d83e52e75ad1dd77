"""Byte-level tokenizer: the offline default (UTF-8 bytes are token ids 0..255)."""
from __future__ import annotations


class ByteTokenizer:
    vocab_size = 256

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")

    def token_str(self, i: int) -> str:
        """A printable label for one token: the character, an escape, or <XX> for non-ASCII bytes."""
        i = int(i)
        if 32 <= i < 127:
            return chr(i)
        return {9: "\\t", 10: "\\n", 13: "\\r"}.get(i, f"<{i:02X}>")
