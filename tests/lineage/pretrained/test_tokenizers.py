"""Checkpoint tokenizers: Kimi's tiktoken.model read with its published pre-tokenizer pattern."""
import base64
import json

import pytest

tiktoken = pytest.importorskip("tiktoken")

from lineage.pretrained import PretrainedError  # noqa: E402
from lineage.pretrained.tokenizer import load_tokenizer  # noqa: E402

WEN = "文".encode()          # e6 96 87


def kimi_files(root, merges=(WEN[:2], WEN, WEN + b"E", b"th", b"the")):
    ranks = [bytes([b]) for b in range(256)] + list(merges)
    (root / "tiktoken.model").write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % r for r, t in enumerate(ranks)))
    (root / "tokenizer_config.json").write_text(json.dumps(
        {"added_tokens_decoder": {"300": {"content": "[BOS]", "special": True}}}))


def test_kimi_tiktoken_round_trip_and_han_runs(tmp_path):
    kimi_files(tmp_path)
    tok = load_tokenizer(tmp_path)
    assert tok.source == "tiktoken.model" and tok.vocab_size == 301
    text = "the 中文English 混合 123"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    # a Han run is a word of its own: the merge across 文|E (rank 258) is never made
    assert tok.encode("文English")[:2] == [257, ord("E")]
    assert tok.encode("the") == [260]
    assert tok.encode("[BOS]") != [300]                                 # text that spells a special token is text
    assert tok.token_str(257) == "文" and tok.token_str(256) == "\\xe6\\x96" and tok.token_str(300) == "[BOS]"


def test_broken_tiktoken_file_is_one_line(tmp_path):
    (tmp_path / "tiktoken.model").write_bytes(b"not base64 at all\n")
    with pytest.raises(PretrainedError, match="tokenizer files cannot be read"):
        load_tokenizer(tmp_path)
