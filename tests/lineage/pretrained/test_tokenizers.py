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


def _ranks_with(*lines: bytes) -> bytes:
    good = b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256))
    return good + b"".join(lines)


@pytest.mark.parametrize("data, words", [
    (b"not base64 at all\n", ("tiktoken.model:1", "a base64 token and a rank")),
    # the lenient decoder drops '@': the empty token, which made tiktoken panic at the first encode
    (_ranks_with(b"@@@@ 256\n"), ("tiktoken.model:257", "'@@@@' is not base64")),
    (_ranks_with(b"YWI= 255\n"), ("tiktoken.model:257", "rank 255 is given twice")),     # a Rust panic at build
    (_ranks_with(b"YQ== 300\n"), ("tiktoken.model:257", "given twice")),
    (_ranks_with(b"YWI= 99999999999999999999\n"), ("tiktoken.model:257", "past")),
    (b"YQ== 0\n", ("tiktoken.model", "byte 0x00 has no token")),                       # a panic at encode
], ids=["not lines of ranks", "invalid base64", "a rank twice", "a token twice", "a huge rank", "bytes missing"])
def test_broken_tiktoken_file_is_one_line(tmp_path, data, words):
    (tmp_path / "tiktoken.model").write_bytes(data)
    with pytest.raises(PretrainedError) as e:
        load_tokenizer(tmp_path)
    assert "\n" not in str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_a_rust_panic_is_one_line(tmp_path, monkeypatch):
    """tiktoken's Rust core panics (pyo3's PanicException, a BaseException) where we did not
    foresee: caught at the load, one line."""
    panic = type("PanicException", (BaseException,), {})

    def encoding(**kw):
        raise panic("no entry found for key")
    kimi_files(tmp_path)
    monkeypatch.setattr(tiktoken, "Encoding", encoding)
    with pytest.raises(PretrainedError, match="tiktoken refused it .no entry found for key"):
        load_tokenizer(tmp_path)
