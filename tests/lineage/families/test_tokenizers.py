"""Checkpoint tokenizers: Kimi's tiktoken.model read with its published pre-tokenizer pattern."""
import base64
import json
import os

import pytest

tiktoken = pytest.importorskip("tiktoken")

from lineage.families import PretrainedError  # noqa: E402
from lineage.families.tokenizer import load_tokenizer  # noqa: E402

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
    (_ranks_with(b"YWI= 99999999999999999999\n"), ("tiktoken.model:257", "out of range")),
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


def _sparse(path, size):
    with open(path, "wb") as f:             # a hole: the size is claimed, no disk is used
        f.truncate(size)


def _kimi_with(root, name, make):
    kimi_files(root)
    (root / name).unlink(missing_ok=True)
    make(root / name)


def _gpt2_vocab(root):
    (root / "vocab.json").write_text(json.dumps({"a": 0, "b": 1, "ab": 2}))
    (root / "merges.txt").write_text("#version: 0.2\na b\n")


# (name, how the file is made, words the one line holds): the file is named with what it is
BROKEN = {
    "tokenizer.json of 300 MB": ("tokenizer.json", lambda p: _sparse(p, 300 << 20), ("tokenizer.json", "limit")),
    "tiktoken.model of 600 MB": ("tiktoken.model", lambda p: _sparse(p, 600 << 20), ("tiktoken.model", "limit")),
    "tokenizer_config.json of 300 MB": ("tokenizer_config.json", lambda p: _sparse(p, 300 << 20),
                                        ("tokenizer_config.json", "limit")),
    "tokenizer.json of 600,000 entries": (      # inside the byte limit, 1.9M tiny ones took 5.7 s and 785 MB
        "tokenizer.json", lambda p: p.write_text(json.dumps({"model": {"vocab": {f"t{i}": i for i in range(600_000)}}})),
        ("tokenizer.json", "over 524,288 entries")),
    "tiktoken.model of 600,000 ranks": (
        "tiktoken.model", lambda p: p.write_bytes(_ranks_with(*(base64.b64encode(i.to_bytes(3, "big")) + b" %d\n" % i
                                                                for i in range(256, 600_000)))),
        ("tiktoken.model:524289", "'524288' is out of range", "below 524,288")),
    "tokenizer.json malformed": ("tokenizer.json", lambda p: p.write_text("{not json"),
                                 ("tokenizer.json", "tokenizers refused it")),
    "tokenizer.json nested": ("tokenizer.json", lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
                              ("tokenizer.json", "tokenizers refused it")),
    "tokenizer.json not UTF-8": ("tokenizer.json", lambda p: p.write_bytes(b'{"\xff": 1}'), ("tokenizer.json", "UTF-8")),
    "tokenizer.json to /dev/zero": ("tokenizer.json", lambda p: p.symlink_to("/dev/zero"),
                                    ("tokenizer.json", "a character device")),
    "tokenizer.json a FIFO": ("tokenizer.json", lambda p: os.mkfifo(p), ("tokenizer.json", "a FIFO")),
    "tokenizer.json a link to nothing": ("tokenizer.json", lambda p: p.symlink_to(p.parent / "gone"),
                                         ("tokenizer.json", "cannot be read")),
    "tiktoken.model to /dev/zero": ("tiktoken.model", lambda p: p.symlink_to("/dev/zero"),
                                    ("tiktoken.model", "a character device")),
    "tokenizer_config.json nested": ("tokenizer_config.json", lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
                                     ("tokenizer_config.json", "nested too deeply")),
    "tokenizer_config.json a list of specials": (
        "tokenizer_config.json", lambda p: p.write_text('{"added_tokens_decoder": [1]}'), ("added_tokens_decoder",)),
    "special token without content": (
        "tokenizer_config.json", lambda p: p.write_text('{"added_tokens_decoder": {"300": {}}}'),
        ("'300'", "string content")),
    "special token id a rank's": (
        "tokenizer_config.json", lambda p: p.write_text('{"added_tokens_decoder": {"65": {"content": "[X]"}}}'),
        ("'65'", "BPE rank")),
    "special token id not a number": (
        "tokenizer_config.json", lambda p: p.write_text('{"added_tokens_decoder": {"x": {"content": "[X]"}}}'),
        ("'x'", "not a number")),
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_tokenizer_file_is_named(tmp_path, case):
    name, make, words = BROKEN[case]
    _kimi_with(tmp_path, name, make)
    with pytest.raises(PretrainedError) as e:
        load_tokenizer(tmp_path)
    assert "\n" not in str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)


@pytest.mark.parametrize("name", ["vocab.json", "merges.txt"])
def test_vocab_and_merges_are_bounded_regular_files(tmp_path, name):
    pytest.importorskip("tokenizers")
    _gpt2_vocab(tmp_path)
    assert load_tokenizer(tmp_path).source == "vocab.json + merges.txt"
    (tmp_path / name).unlink()
    (tmp_path / name).symlink_to("/dev/zero")
    with pytest.raises(PretrainedError, match=f"{name}: cannot be read .a character device"):
        load_tokenizer(tmp_path)
    (tmp_path / name).unlink()
    _sparse(tmp_path / name, 100 << 20)
    with pytest.raises(PretrainedError, match=f"{name}: cannot be read .file is 104,857,600 bytes .limit"):
        load_tokenizer(tmp_path)


def test_a_tokenizer_that_loads_but_cannot_encode_is_refused_at_its_load(tmp_path):
    """An unk_token missing from the vocabulary: the file parses, and the first encode of text
    with an unknown character fails (found by the fuzz test)."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab={"a": 0, "b": 1}, merges=[], unk_token=""))
    (tmp_path / "tokenizer.json").write_text(tok.to_str())
    with pytest.raises(PretrainedError, match="tokenizer.json: tokenizers refused it .Unk token"):
        load_tokenizer(tmp_path)
