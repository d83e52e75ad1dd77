"""The `lineage` command line: params, memory, --version, and no torch on the arithmetic path."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lineage.cli.main import main


def test_params_json(capsys):
    assert main(["params", "gpt2-small", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["total"] == 124_439_808 and out["active"] == 124_439_808


def test_params_text(capsys):
    assert main(["params", "k3"]) == 0
    out = capsys.readouterr().out
    assert "69 kda, 24 mla" in out and "2.78T" in out


def test_unknown_preset_exit_2(capsys):
    assert main(["params", "k4"]) == 2
    err = capsys.readouterr().err
    assert "unknown preset 'k4'" in err and "Traceback" not in err


def test_memory(capsys):
    assert main(["memory", "gpt2-small", "--context", "1024", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["context"] for r in rows] == [256, 512, 1024, 2048, 4096]
    assert rows[2]["cache_bytes"] == 12 * 2 * 12 * 64 * 2 * 1024


def test_memory_on_several_cards(capsys):
    """k3's weights exceed one card: the zeros say so and name the cards that hold them, and
    --cards N spreads weights and caches over N cards (N times the memory, one copy of weights)."""
    assert main(["memory", "k3", "--context", "1048576"]) == 0
    one = capsys.readouterr().out
    needed = int(one.split("--cards ")[1].split()[0].rstrip(")"))
    assert "batch is 0" in one and needed > 1
    assert main(["memory", "k3", "--context", "1048576", "--cards", "48", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    card = 141 * 10**9
    for r in got["rows"]:
        assert r["batch_per_card"] == (48 * card - got["weight_bytes"]) // (r["cache_bytes"] + r["state_bytes"])
    assert got["cards"] == 48 and got["rows"][2]["batch_per_card"] > 0
    assert main(["memory", "k3", "--cards", "0"]) == 2
    assert "--cards must be at least 1" in capsys.readouterr().err


def test_version_and_no_torch_on_arithmetic_path():
    code = ("import sys; from lineage.cli.main import main; main(['params', 'k3', '--json']); "
            "main(['memory', 'k3']); assert 'torch' not in sys.modules, 'torch imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "lineage.cli.main", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("lineage ")


def test_run_reports_a_broken_file_before_opening(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntitle: t\nmodel: {preset: k3-mni}\ninput: {text: hi}\n")
    assert main(["run", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{bad}:3:17: model.preset: unknown preset 'k3-mni'")
    junk = tmp_path / "cut.trace"
    junk.write_bytes(b"LNTRACE\n\x00")
    assert main(["run", str(junk)]) == 2
    assert "cut.trace" in capsys.readouterr().err


def test_output_cut_short_by_its_reader_ends_quietly():
    """`lineage memory k3 | head -1`: the reader leaves before lineage writes; no traceback."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                                     os.environ.get("PYTHONPATH")]))}
    for cmd in (["memory", "k3"], ["params", "k3", "--json"]):
        proc = subprocess.Popen([sys.executable, "-m", "lineage.cli.main", *cmd], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        proc.stdout.close()                      # long before its first line (imports take longer)
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 141 and err == "", (cmd, err)


def test_a_mistyped_scenario_name_gets_a_hint(capsys):
    assert main(["run", "recal"]) == 2
    assert capsys.readouterr().err.strip() == "recal: no such file (did you mean 'recall'?)"
    assert main(["run", "nothing_like_any"]) == 2
    assert capsys.readouterr().err.strip() == "nothing_like_any: no such file"


def test_memory_prints_bytes_in_a_readable_unit(capsys):
    assert main(["memory", "gpt2-small"]) == 0
    rows = capsys.readouterr().out.splitlines()[3:]
    assert rows[2].split() == ["131,072", "4.5", "GiB", "0", "B", "29"]        # not 4608.0Mi, not 29.0


# -- issue 51, item 6: one line where a traceback used to be --------------------------------

def _lineage(*cmd, stdout=subprocess.PIPE, env=None, cwd=None):
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, **(env or {}),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "lineage.cli.main", *cmd], stdout=stdout,
                          stderr=subprocess.PIPE, env=env, cwd=cwd, timeout=120)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_disk_under_stdout_is_one_line(tmp_path):
    cache = {"LINEAGE_CACHE_DIR": str(tmp_path / "cache")}
    for cmd in (["params", "k3"], ["list"], ["snapshot", "fig3_two_facts", "--step", "2", "-o", "-"],
                ["record", "fig3_two_facts", "-o", str(tmp_path / "t.trace"), "--steps", "2"]):
        with open("/dev/full", "w") as full:
            proc = _lineage(*cmd, stdout=full, env=cache)
        err = proc.stderr.decode()
        assert proc.returncode == 2 and "Traceback" not in err, (cmd, err)
        assert err.splitlines()[-1] == "lineage: cannot write the output: No space left on device", (cmd, err)


def test_characters_stdout_cannot_encode_are_replaced(tmp_path):
    """PYTHONIOENCODING=ascii: the tour's text snapshot (a ␣ for a space token) is printed, `?`
    for what ascii lacks, instead of UnicodeEncodeError."""
    proc = _lineage("snapshot", "tour", "--step", "3", "-o", "-",
                    env={"PYTHONIOENCODING": "ascii", "LINEAGE_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr.decode(), proc.stderr.decode()
    assert b"?" in proc.stdout and proc.stdout.isascii()


@pytest.mark.parametrize("command", ["validate", "snapshot", "slides", "arena"])
def test_ctrl_c_is_one_line_and_exit_130(command, monkeypatch, capsys, tmp_path):
    import lineage.cli.export as export_cli
    import lineage.cli.main as cli_main
    import lineage.cli.evaluation as evaluation

    def interrupted(*args, **kw):
        raise KeyboardInterrupt
    argv = {"validate": ["validate", "recall"], "arena": ["arena"],
            "snapshot": ["snapshot", "recall", "--step", "1", "-o", str(tmp_path / "s.txt")],
            "slides": ["slides", "recall", "-o", str(tmp_path / "deck")]}[command]
    target = {"validate": (cli_main, "check"), "arena": (evaluation, "arena"),
              "snapshot": (export_cli, "_snapshot"), "slides": (export_cli, "_slides")}[command]
    monkeypatch.setattr(*target, interrupted)
    try:
        code = main(argv)
    except KeyboardInterrupt:          # would end pytest's session, not this test
        pytest.fail("KeyboardInterrupt came out of main(): a traceback")
    assert code == 130
    assert capsys.readouterr().err == "lineage: interrupted\n"


@pytest.mark.parametrize("argv", [["memory", "k3", "--context", "-1"], ["memory", "k3", "--context", "0"],
                                  ["memory", "k3", "--weight-bytes", "nan"], ["memory", "k3", "--weight-bytes", "-2"],
                                  ["serve", "--port", "99999"], ["serve", "--port", "0"],
                                  ["serve", "--host", "256.1.1.1"], ["serve", "--host", "no such host"]])
def test_nonsense_numbers_and_addresses_are_one_line(argv, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert len(captured.err.strip().splitlines()) == 1 and captured.out == "", captured.err
