"""How fast and how small a hostile checkpoint folder is refused (issue 31), and the hostile
inputs, outputs and arguments of issue 51: each case a copy of a tiny checkpoint of one family
(or an empty folder) with one file made hostile, loaded by `lineage.load_pretrained` (or
given to `lineage params` or `lineage validate`) in a fresh process, timed from outside, with the
child's peak memory.

    python tests/benchmarks/bench_reliability.py [--only WORD ...]    # a table for BENCHMARKS.md

A case's mode: "load" (`lineage.load_pretrained`), "params" or "validate" (that command on the
folder: validate checks every tensor's header without reading one), or a command line, a tuple
whose "{dir}" is the case's folder (issue 51: a hostile --device-map file, -o a FIFO with --force,
a trace of millions of empty records, nonsense arguments and settings, a killed writer's partial;
the "files" family is an empty folder; the "hub" family a Hugging Face cache holding org/tiny, a
GPT-2, whose refs/main is made hostile). A case may say what else it expects: `exit` (default 2),
`lines` (most lines on stderr, default 1), `env` (settings for the child; "{dir}" in a value is the
case's folder too), `stdout` (a file for the child's output: /dev/full), `check` (a function of the folder: what is wrong with it afterwards, or None).

A case passes when the child exits as expected with at most its lines on stderr, in under 5 s and
500 MB, and its check finds nothing wrong; the table says which do not. The tiny checkpoints are
the tests' own builders (transformers' classes, saved), so the folders are the ones
tests/lineage/families/test_hostile_folders.py refuses.
"""
import base64
import json
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
SECONDS, MEGABYTES = 5.0, 500

# the child: imports, then the load (or `lineage params`) timed alone, then its peak memory from
# VmHWM (getrusage's ru_maxrss would carry the parent's size across the exec)
CHILD = """
import sys, time
mode, args = sys.argv[1], sys.argv[2:]
import torch, lineage                   # what every command pays first, timed apart from the refusal
from lineage.families import PretrainedError
from lineage.cli.main import main
t = time.perf_counter()
if mode != "load":
    rc = main([mode, *args])
else:
    try:
        lineage.load_pretrained(args[0])
        rc = 0
    except PretrainedError as e:
        print(f"lineage: {e}", file=sys.stderr)
        rc = 2
hwm = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print("RESULT", rc, time.perf_counter() - t, hwm, file=sys.stderr)
"""


def builders() -> dict:
    from tests.lineage.families.test_gpt2 import gpt2
    from tests.lineage.families.test_hybrids import kimi, qwen
    from tests.lineage.families.test_llama import make
    from tests.lineage.families.test_mamba2_checkpoint import mamba
    from tests.lineage.families.test_olmo_hybrid import olmo
    from tests.lineage.families.test_qwen3_5 import qwen as qwen3_5
    return {"gpt2": gpt2, "llama": make, "qwen3": lambda p: make(p, "qwen3"), "kimi_linear": kimi,
            "qwen3_next": qwen, "qwen3_5": lambda p: qwen3_5(p, moe=True, composite=True), "olmo_hybrid": olmo,
            "mamba2": mamba, "files": lambda p: p.mkdir(parents=True), "hub": lambda p: hub_cache(p, gpt2)}


HUB_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def hub_cache(path, gpt2):
    """A Hugging Face cache holding org/tiny: a GPT-2 at one commit, refs/main naming it."""
    repo = path / "models--org--tiny"
    gpt2(repo / "snapshots" / HUB_COMMIT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(HUB_COMMIT)


# -- how each case spoils its copy ------------------------------------------------------------

def config(**fields):
    def spoil(path):
        cfg = json.loads((path / "config.json").read_text())
        cfg.update(fields)
        (path / "config.json").write_text(json.dumps(cfg))
    return spoil


def text_config(**fields):        # a multimodal composite's text model
    def spoil(path):
        cfg = json.loads((path / "config.json").read_text())
        cfg["text_config"].update(fields)
        (path / "config.json").write_text(json.dumps(cfg))
    return spoil


def write(name, data: bytes):
    return lambda path: (path / name).write_bytes(data)


def sparse(name, size):
    def spoil(path):
        with open(path / name, "wb") as f:
            f.truncate(size)
    return spoil


def link(name, target):
    def spoil(path):
        (path / name).unlink(missing_ok=True)
        (path / name).symlink_to(target)
    return spoil


def tensor(name, shape):
    def spoil(path):
        import torch
        from safetensors.torch import load_file, save_file
        sd = load_file(str(path / "model.safetensors"))
        sd[name] = torch.zeros(shape)
        save_file(sd, str(path / "model.safetensors"))
    return spoil


def int_tensor(name):
    def spoil(path):
        from safetensors.torch import load_file, save_file
        sd = load_file(str(path / "model.safetensors"))
        sd[name] = sd[name].int()
        save_file(sd, str(path / "model.safetensors"))
    return spoil


def kimi_tokenizer(extra: bytes = b""):
    ranks = b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256))
    return write("tiktoken.model", ranks + extra)


def index(n, shards):
    entries = ",".join(f'"t{i}": "s{i % shards}"' for i in range(n))
    return write("model.safetensors.index.json", ('{"weight_map": {' + entries + "}}").encode())


def word_level(n):              # a tokenizer.json of n tiny vocabulary entries
    vocab = ",".join(f'"t{i}": {i}' for i in range(n))
    return write("tokenizer.json", ('{"model": {"type": "WordLevel", "unk_token": "t0", "vocab": {' + vocab +
                                    "}}}").encode())


def many_ranks(n):
    ranks = b"".join(base64.b64encode(i.to_bytes(3, "big") + b"z") + b" %d\n" % (256 + i) for i in range(n))
    return kimi_tokenizer(ranks)


def both(*spoils):
    def spoil(path):
        for s in spoils:
            s(path)
    return spoil


def fifo(name):
    return lambda path: os.mkfifo(path / name)


def unix_socket(name):
    def spoil(path):
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path / name))
        s.close()                     # the socket file stays, as a server's does
    return spoil


def empty_records(name, n):           # a trace header, then n records of no bytes (crc32(b"") is 0)
    def spoil(path):
        from tests.lineage.playback.test_trace_hostile import MAGIC, REC, _header
        with open(path / name, "wb") as f:
            f.write(MAGIC + _header())
            for _ in range(n // 1_000_000):
                f.write(REC.pack(b"F", 0, 0) * 1_000_000)
    return spoil


def dead_writers_partial(path):       # what kill -9 inside a writer leaves: no pid is 2^31 - 1
    from lineage.files import _HOST
    (path / f".lineage-{_HOST}-{2**31 - 1}-{'a' * 12}.partial").write_bytes(b"half")


def still(name, test, what):          # a check: `name` in the folder is still what it was
    def check(path):
        return None if test(os.lstat(path / name).st_mode) else f"{name} is no longer {what}"
    return check


def no_partials(path):
    left = [p.name for p in path.iterdir() if p.name.endswith(".partial")]
    return f"left {left[0]}" if left else None


SCENARIO = "version: 1\ntitle: t\nmodel: {preset: tiny-kda}\ninput: {text: hi there}\n"
NESTED = write("config.json", b"[" * 100_000 + b"]" * 100_000)
KIMI_PATTERN = {"full_attn_layers": [4], "kda_layers": [1, 2, 3, 5], "head_dim": 16, "num_heads": 3}

MEMORY_MAP = ("memory", "{dir}", "--device-map", "{dir}/map.json", "--gpu-memory", "2x141GB")
HUB_MEMORY = ("memory", "org/tiny", "--context", "64")      # the id found in the cache at {dir}
IN_CACHE = {"env": {"HF_HUB_CACHE": "{dir}"}}
REF = "models--org--tiny/refs/main"
RECORD_FORCED = ("record", "{dir}", "--ids", "1,2,3", "-o", "{dir}/out.trace", "--force")

# (family, case, spoil, mode[, what else it expects])
CASES = [
    ("gpt2", "config.json nested 100,000 deep", NESTED, "load"),
    ("gpt2", "config.json nested 100,000 deep (lineage params)", NESTED, "params"),
    ("gpt2", "n_head: 0", config(n_head=0), "load"),
    ("gpt2", "n_layer: 20000", config(n_layer=20_000), "load"),
    ("gpt2", "n_layer: 1024 over 3 layers of weights", config(n_layer=1024), "load"),
    ("gpt2", "n_layer: 16M (lineage params)", config(n_layer=16_000_000), "params"),
    ("gpt2", "n_embd: 196,608 (embedding 101 x 196,608)", config(n_embd=3 * 65536), "load"),
    ("gpt2", "3-D c_attn.weight", tensor("transformer.h.0.attn.c_attn.weight", (36, 108, 1)), "load"),
    ("gpt2", "c_fc.weight 36 x 100 (config: 36 x 144)", tensor("transformer.h.1.mlp.c_fc.weight", (36, 100)), "load"),
    ("gpt2", "an int32 c_proj.weight", int_tensor("transformer.h.2.mlp.c_proj.weight"), "load"),
    ("gpt2", "3-D c_attn.weight (lineage validate)", tensor("transformer.h.0.attn.c_attn.weight", (36, 108, 1)),
     "validate"),
    ("gpt2", "an int32 c_proj.weight (lineage validate)", int_tensor("transformer.h.2.mlp.c_proj.weight"), "validate"),
    ("gpt2", "index weight_map a list", write("model.safetensors.index.json", b'{"weight_map": []}'), "load"),
    ("gpt2", "index weight_map a string", write("model.safetensors.index.json", b'{"weight_map": "x"}'), "load"),
    ("gpt2", "index of 2.6M tiny entries, a shard each (55 MB)", index(2_600_000, 2_600_000), "load"),
    ("gpt2", "index of 600,000 entries in one shard", index(600_000, 1), "load"),
    ("gpt2", "index naming 20,000 shards", index(20_000, 20_000), "load"),
    ("gpt2", "tokenizer.json of 300 MB", sparse("tokenizer.json", 300 << 20), "load"),
    ("gpt2", "tokenizer.json linked to /dev/zero", link("tokenizer.json", "/dev/zero"), "load"),
    ("gpt2", "tokenizer.json of 1.9M tiny entries (36 MB)", word_level(1_900_000), "load"),
    ("gpt2", "tokenizer.json nested 100,000 deep", write("tokenizer.json", b"[" * 100_000 + b"]" * 100_000), "load"),
    ("llama", "num_hidden_layers: 1024", config(num_hidden_layers=1024), "load"),
    ("llama", "rope_scaling a list", config(rope_scaling=[1]), "load"),
    ("llama", "down_proj.weight transposed", tensor("model.layers.1.mlp.down_proj.weight", (50, 35)), "load"),
    ("llama", "intermediate_size: 262,144", config(intermediate_size=1 << 18), "load"),
    ("qwen3", "head_dim: 0", config(head_dim=0), "load"),
    ("qwen3", "vocab_size: 4,194,304", config(vocab_size=1 << 22), "load"),
    ("qwen3_next", "num_attention_heads: 0, head_dim: null", config(num_attention_heads=0, head_dim=None), "load"),
    ("qwen3_next", "layer_types: [{}, {}]", config(layer_types=[{}, {}]), "load"),
    ("qwen3_next", "mlp_only_layers: [[0]]", config(mlp_only_layers=[[0]]), "load"),
    ("qwen3_next", 'model_type: ["qwen3_next"]', config(model_type=["qwen3_next"]), "load"),
    ("qwen3_next", 'rope_theta: "abc"', config(rope_theta="abc"), "load"),
    ("qwen3_next", "partial_rotary_factor: [0.25]", config(partial_rotary_factor=[0.25]), "load"),
    ("qwen3_next", "num_hidden_layers: 16M", config(num_hidden_layers=16_000_000, layer_types=None), "load"),
    ("qwen3_next", "in_proj_qkvz.weight transposed", tensor("model.layers.1.linear_attn.in_proj_qkvz.weight", (40, 124)),
     "load"),
    ("qwen3_next", "num_experts: 4096 of width 65,536", config(num_experts=4096, moe_intermediate_size=65536), "load"),
    ("kimi_linear", "full_attn_layers: 2", config(layer_types=None, linear_attn_config={**KIMI_PATTERN,
                                                                                         "full_attn_layers": 2}), "load"),
    ("kimi_linear", 'linear_attn_config.head_dim: "16"', config(layer_types=None, linear_attn_config={
        **KIMI_PATTERN, "head_dim": "16"}), "load"),
    ("kimi_linear", "linear_attn_config.num_heads: 4.0", config(layer_types=None, linear_attn_config={
        **KIMI_PATTERN, "num_heads": 4.0}), "load"),
    ("kimi_linear", "an expert's w2.weight 40 x 23", tensor("model.layers.1.block_sparse_moe.experts.3.w2.weight", (40, 23)),
     "load"),
    ("kimi_linear", "an expert's w2.weight 40 x 23 (lineage validate)",
     tensor("model.layers.1.block_sparse_moe.experts.3.w2.weight", (40, 23)), "validate"),
    ("kimi_linear", "vocab_size: 1M", config(vocab_size=1 << 20), "load"),
    ("kimi_linear", "tiktoken.model with invalid base64", kimi_tokenizer(b"@@@@ 256\n"), "load"),
    ("kimi_linear", "tiktoken.model with a rank twice", kimi_tokenizer(b"YWI= 255\n"), "load"),
    ("kimi_linear", "tiktoken.model of 1M ranks (16 MB)", many_ranks(1 << 20), "load"),
    ("kimi_linear", "tiktoken.model of 600 MB", sparse("tiktoken.model", 600 << 20), "load"),
    ("kimi_linear", "tokenizer_config.json of 300 MB", both(kimi_tokenizer(), sparse("tokenizer_config.json", 300 << 20)),
     "load"),
    ("qwen3_5", "text_config.num_hidden_layers: 1024", text_config(num_hidden_layers=1024, layer_types=None), "load"),
    ("qwen3_5", "text_config nested 100,000 deep", NESTED, "load"),
    ("qwen3_5", "text_config.num_experts: 4096", text_config(num_experts=4096), "load"),
    ("olmo_hybrid", "num_hidden_layers: 1024", config(num_hidden_layers=1024, layer_types=None), "load"),
    ("olmo_hybrid", "linear_key_head_dim: [9]", config(linear_key_head_dim=[9]), "load"),
    ("mamba2", "num_hidden_layers: 1024", config(num_hidden_layers=1024), "load"),
    ("mamba2", "state_size: 65,536", config(state_size=65536), "load"),
    ("mamba2", "n_groups: 0", config(n_groups=0), "load"),
    ("mamba2", "in_proj.weight of 136 rows (config: 137)", tensor("backbone.layers.1.mixer.in_proj.weight", (136, 30)),
     "load"),
    # issue 51: inputs beside the checkpoint, outputs, arguments and settings
    ("gpt2", "--device-map a FIFO (lineage memory)", fifo("map.json"), MEMORY_MAP),
    ("gpt2", "--device-map linked to /dev/zero (lineage memory)", link("map.json", "/dev/zero"), MEMORY_MAP),
    ("gpt2", "--device-map nested 100,000 deep (lineage memory)",
     write("map.json", b"[" * 100_000 + b"]" * 100_000), MEMORY_MAP),
    ("gpt2", "-o a FIFO, --force (lineage record)", fifo("out.trace"), RECORD_FORCED,
     {"check": still("out.trace", stat.S_ISFIFO, "a FIFO")}),
    ("gpt2", "-o a socket, --force (lineage record)", unix_socket("out.trace"), RECORD_FORCED,
     {"check": still("out.trace", stat.S_ISSOCK, "a socket")}),
    ("files", "a trace of 11M empty records (99 MB)", empty_records("e.trace", 11_000_000),
     ("validate", "{dir}/e.trace")),
    ("files", "record --steps -5", lambda p: None, ("record", "recall", "-o", "{dir}/t.trace", "--steps", "-5"),
     {"check": lambda p: "wrote a trace" if (p / "t.trace").exists() else None}),
    ("files", "record --steps 0", lambda p: None, ("record", "recall", "-o", "{dir}/t.trace", "--steps", "0"),
     {"check": lambda p: "wrote a trace" if (p / "t.trace").exists() else None}),
    ("files", "a scenario of 5,000 bad ids (says 20 and how many more)",
     write("s.yaml", SCENARIO.replace("text: hi there", "ids: [" + ", ".join(["x"] * 5000) + "]").encode()),
     ("validate", "{dir}/s.yaml"), {"lines": 21}),
    ("files", "decoding.seed 10^29 (lineage validate)",
     write("s.yaml", (SCENARIO + "decoding: {mode: sample, seed: " + "1" + "0" * 29 + "}\n").encode()),
     ("validate", "{dir}/s.yaml")),
    ("files", "LINEAGE_BACKEND=tirton (lineage record: one warning, exit 0)", lambda p: None,
     ("record", "recall", "-o", "{dir}/t.trace", "--steps", "1"), {"exit": "0", "env": {"LINEAGE_BACKEND": "tirton"}}),
    ("files", "a killed writer's .lineage partial (then lineage snapshot: exit 0)", dead_writers_partial,
     ("snapshot", "recall", "--step", "1", "--no-cache", "-o", "{dir}/a.txt"), {"exit": "0", "lines": 0,
                                                                               "check": no_partials}),
    # issue 51, item 3: a served scenario names a checkpoint outside the served root (its folder)
    ("files", "serve: a scenario naming model.pretrained /etc", write("s.yaml", SCENARIO.replace(
        "{preset: tiny-kda}", "{pretrained: /etc}").encode()), ("serve", "{dir}/s.yaml", "--root", "{dir}")),
    ("files", "serve: a scenario naming weights.checkpoint /etc/passwd", write("s.yaml", (
        SCENARIO + "weights: {checkpoint: /etc/passwd}\n").encode()), ("serve", "{dir}/s.yaml", "--root", "{dir}")),
    # item 6: one line where a traceback was
    ("files", "memory --context -1", lambda p: None, ("memory", "k3", "--context", "-1")),
    ("files", "memory --weight-bytes nan", lambda p: None, ("memory", "k3", "--weight-bytes", "nan")),
    ("files", "serve --port 99999", lambda p: None, ("serve", "--port", "99999")),
    ("files", "serve --host 256.1.1.1", lambda p: None, ("serve", "--host", "256.1.1.1")),
    ("files", "snapshot -o - into a full stdout (/dev/full)", lambda p: None,
     ("snapshot", "recall", "--step", "2", "--no-cache", "-o", "-"), {"stdout": "/dev/full"}),
    ("files", "params into a full stdout (/dev/full)", lambda p: None, ("params", "k3"), {"stdout": "/dev/full"}),
    ("files", "PYTHONIOENCODING=ascii (lineage list: exit 0)", lambda p: None, ("list",),
     {"exit": "0", "lines": 0, "env": {"PYTHONIOENCODING": "ascii"}}),
    # a hub id opened from the local cache: its refs/main read bounded, a commit id, never a path out
    ("hub", "org/tiny in the cache (lineage memory: exit 0)", lambda p: None, HUB_MEMORY,
     {**IN_CACHE, "exit": "0", "lines": 0}),
    ("hub", "org/absent, not in the cache (lineage validate)", lambda p: None, ("validate", "org/absent"), IN_CACHE),
    ("hub", "refs/main of 1 GB", sparse(REF, 1 << 30), HUB_MEMORY, IN_CACHE),
    ("hub", "refs/main a FIFO", both(lambda p: (p / REF).unlink(), fifo(REF)), HUB_MEMORY, IN_CACHE),
    ("hub", "refs/main linked to /dev/zero", link(REF, "/dev/zero"), HUB_MEMORY, IN_CACHE),
    ("hub", "refs/main not hex", write(REF, b"not a commit id"), HUB_MEMORY, IN_CACHE),
    ("hub", "refs/main ../../..", write(REF, b"../../.."), HUB_MEMORY, IN_CACHE),
    ("hub", "refs/main names a snapshot linked to /", both(write(REF, b"f" * 40),
                                                          link("models--org--tiny/snapshots/" + "f" * 40, "/")),
     HUB_MEMORY, IN_CACHE),
    ("hub", "--revision ../../../etc", lambda p: None, (*HUB_MEMORY, "--revision", "../../../etc"), IN_CACHE),
]


def run(mode, path: Path, most: int = 1, env: dict | None = None, stdout: str | None = None) -> tuple[
        str, float, float | None, float | None, str]:
    """(exit or what happened, whole-process seconds, seconds of the load alone, peak RSS MB, the
    line it said). `stdout`: a file the child writes its output into (/dev/full: a full disk)."""
    argv = [mode, str(path)] if isinstance(mode, str) else [mode[0], *(a.format(dir=path) for a in mode[1:])]
    start = time.perf_counter()
    try:
        with open(stdout or os.devnull, "w") as sink:
            out = subprocess.run([sys.executable, "-c", CHILD, *argv], stdout=sink if stdout else subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 env=dict(os.environ, PYTHONPATH=str(ROOT),
                                          **{k: v.format(dir=path) for k, v in (env or {}).items()}),
                                 cwd=ROOT, timeout=120)
    except subprocess.TimeoutExpired:
        return "killed at 120 s", time.perf_counter() - start, None, None, ""
    wall = time.perf_counter() - start
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    if not lines or not lines[-1].startswith("RESULT"):
        return f"crashed ({lines[-1][:60] if lines else out.returncode})", wall, None, None, ""
    _, rc, secs, hwm = lines[-1].split()
    said = lines[:-1]
    rc = rc if len(said) <= most else f"{rc}, {len(said)} lines"
    return rc, wall, float(secs), int(hwm) / 1024, said[0] if said else ""


def main() -> None:
    import argparse
    p = argparse.ArgumentParser(description="hostile checkpoint folders: exit, time and peak memory of each load")
    p.add_argument("--only", action="append", help="run the cases whose family or name holds this word (repeatable)")
    only = p.parse_args().only
    cases = [c for c in CASES if only is None or any(w in c[0] or w in c[1] for w in only)]
    print(f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.1f}")
    print("| family | case | exit | refused in s | process s | peak RSS MB | the line (folder path cut) |\n"
          "|---|---|---|---|---|---|---|")
    slow = 0
    with tempfile.TemporaryDirectory() as d:
        base = Path(d) / "base"
        make = builders()
        for family in dict.fromkeys(c[0] for c in cases):
            make[family](base / family)
        for i, (family, name, spoil, mode, *more) in enumerate(cases):
            expect = more[0] if more else {}
            path = Path(d) / f"case{i}" / family
            shutil.copytree(base / family, path)
            spoil(path)
            rc, wall, secs, rss, said = run(mode, path, expect.get("lines", 1), expect.get("env"), expect.get("stdout"))
            wrong = expect["check"](path) if "check" in expect else None
            if wrong is not None:
                rc = f"{rc}, {wrong}"
            ok = rc == expect.get("exit", "2") and secs is not None and secs < SECONDS and rss < MEGABYTES
            slow += not ok
            said = said.replace(str(path.parent) + "/", "").replace("|", "\\|")
            print(f"| {family} | {name} | {rc}{'' if ok else ' (FAILS)'} | {'-' if secs is None else f'{secs:.3f}'} | "
                  f"{wall:.2f} | {'-' if rss is None else f'{rss:.0f}'} | {said[:100]} |", flush=True)
    print(f"\n{len(cases) - slow} of {len(cases)} cases exit as expected (2 unless said) with their lines (one "
          f"unless said), in under {SECONDS:g} s and {MEGABYTES} MB; load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
