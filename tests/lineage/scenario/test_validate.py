"""Scenario files: every bundled one validates; broken ones give located one-line problems."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.scenario import load, loads
from lineage.scenario.problems import ScenarioError
from lineage.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
BUNDLED = sorted((ROOT / "lineage" / "scenarios").glob("*.yaml"))
LINE = re.compile(r"^[^\n:]+:\d+:\d+: .+$")
GOOD = (ROOT / "lineage" / "scenarios" / "tour.yaml").read_text()


def problems_of(text: str, name="s.yaml") -> list[str]:
    try:
        loads(text, name)
    except ScenarioError as e:
        return [str(p) for p in e.problems]
    return []


def test_bundled_scenarios_validate():
    assert len(BUNDLED) >= 12
    for path in BUNDLED:
        load(path)
    assert main(["validate", *map(str, BUNDLED)]) == 0


def test_one_scenario_per_figure():
    figs = {p.name.split("_")[0] for p in BUNDLED if p.name.startswith("fig")}
    assert figs == {f"fig{i}" for i in range(1, 10)}


@pytest.mark.parametrize("text, where, says", [
    ("version: 2\ntitle: t\n", "s.yaml:1:10", "version must be 1"),
    ("version: 1\ntitle: t\nmodel: {preset: k3-mni}\ninput: {text: hi}\n", "s.yaml:3:17", "did you mean 'k3-mini'"),
    ("version: 1\ntitle: t\nmodel: {preset: k3-mini}\ninput: {text: hi}\ndecoding: {mdoe: greedy}\n",
     "s.yaml:5:12", "unknown key 'mdoe' (did you mean 'mode'?)"),
    ("version: 1\ntitle: t\nmodel: {preset: k3-mini}\ninput: {text: hi}\nsteps: 1000000\n",
     "s.yaml:5:8", "too large (limit 100,000)"),
    ("version: 1\ntitle: t\nmodel: {preset: k3-mini}\ninput: {text: hi}\npanels: [{kind: state, layer: 3}]\n",
     "s.yaml:5:31", "layer 3 is mla"),
    ("version: 1\ntitle: t\nmodel: {preset: k3-mini, overrides: {kda: {gate_from: kimi}}}\ninput: {text: hi}\n",
     "s.yaml:3:44", "did you mean 'gate_form'"),
    ("version: 1\ntitle: t\nmodel: {preset: k3}\ninput: {text: hi}\n", "s.yaml:3:17", "shape-only"),
    ("version: 1\ntitle: t\nmodel: !!python/object/apply:os.system [ls]\n", "s.yaml:3:8", "not allowed"),
    ("version: 1\ntitle: t\ntitle: u\n", "s.yaml:3:1", "duplicate key"),
    ("version: 1\ntitle: [unclosed\n", "s.yaml:3:1", "YAML syntax"),
    ("version: 1\ntitle: t\nmodel: {preset: tiny-kda}\ninput: {text: hi}\ncaptions: [{at: 9, text: x}]\n",
     "s.yaml:5:17", "past the end"),
    # torch's manual_seed takes at most 2^64 - 1: past it the run failed at its first sampled step, unlocated
    ("version: 1\ntitle: t\nmodel: {preset: tiny-kda}\ninput: {text: hi}\ndecoding: {mode: sample, seed: "
     "100000000000000000000000000000}\n", "s.yaml:5:32: decoding.seed", "too large (limit 18,446,744,073,709,551,615)"),
])
def test_located_problems(text, where, says):
    lines = problems_of(text)
    assert lines, "expected a problem"
    assert any(l.startswith(where) and says in l for l in lines), lines


def test_binary_junk_and_bombs():
    from lineage.scenario.reader import load_text
    assert "s.yaml:2:5: character #x0000 is not allowed" in problems_of("version: 1\njunk\x00", "s.yaml")[0]
    with pytest.raises(ScenarioError, match=r"s.yaml:2:1: not UTF-8"):
        load_text(b"version: 1\n\xff\xfe\x00junk", "s.yaml")
    bomb = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]\n" for i in range(8))
    with pytest.raises(ScenarioError, match="alias bomb"):
        load_text(bomb, "s.yaml")
    with pytest.raises(ScenarioError, match="limit"):
        load_text("a: " + "x" * (2 << 20), "s.yaml")


def test_validate_cli_exit_codes(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntitle: t\nmodel: {preset: k3-mini}\ninput: {text: hi}\ndecoding: {mdoe: x}\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{bad}:5:12: decoding.mdoe: unknown key")
    assert main(["validate", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_thousands_of_problems_print_the_first_and_a_count(tmp_path, capsys):
    """A file of 3,000 bad ids: the first 20 problems and one line saying how many more
    (a 150 KB file printed 12,923 lines, issue 51); the error keeps them all."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntitle: t\nmodel: {preset: tiny-kda}\ninput: {ids: [" + ", ".join(["x"] * 3000) + "]}\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 21 and err[0].startswith(f"{bad}:4:15: input.ids[0]: expected an integer"), err[:2]
    assert err[-1] == f"{bad}: and 2,980 more problems (the first 20 are shown)"
    with pytest.raises(ScenarioError) as e:
        load(bad)
    assert len(e.value.problems) == 3000 and str(e.value).count("\n") == 20


def test_validate_is_fast_and_torch_free():
    code = ("import sys, time; t = time.perf_counter(); from lineage.cli.main import main; "
            f"rc = main(['validate', *{[str(p) for p in BUNDLED]!r}]); "
            "assert rc == 0, rc; assert 'torch' not in sys.modules, 'torch imported'; "
            "print(time.perf_counter() - t)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# --------------------------------------------------------------------- property tests

def _check_located(text_or_bytes):
    """The loader either accepts the text or raises ScenarioError with located one-liners;
    anything else (another exception, a hang) fails the test."""
    from lineage.scenario.reader import load_text
    from lineage.scenario import check
    try:
        check(load_text(text_or_bytes, "m.yaml"))
    except ScenarioError as e:
        assert e.problems
        for p in e.problems:
            line = str(p)
            assert LINE.match(line) and "\n" not in line and "Traceback" not in line, line
            assert line.startswith("m.yaml:") and p.line >= 1 and p.col >= 1


mutation = st.tuples(st.integers(0, len(GOOD)), st.integers(0, 12), st.text(max_size=12))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutation, min_size=1, max_size=4))
def test_mutated_yaml_gives_located_problems(muts):
    text = GOOD
    for at, cut, insert in muts:
        at = min(at, len(text))
        text = text[:at] + insert + text[at + cut:]
    _check_located(text)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_give_located_problems(data):
    _check_located(b"version: 1\n" + data)


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**9, 10**9) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["model", "models", "input", "decoding", "panels", "captions", "weights", "figure",
                        "steps", "title", "device", "dtype"]), yaml_values)
def test_wrong_values_give_located_problems(key, value):
    import yaml
    doc = yaml.safe_load(GOOD)
    doc[key] = value
    _check_located(yaml.safe_dump(doc))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(mutation, min_size=1, max_size=3))
def test_validate_cli_exit_2_on_mutations(tmp_path, capsys, muts):
    """Through the command itself: exit 0 for a still-valid file, otherwise exit 2 with only
    located one-line problems on stderr and never a traceback."""
    text = GOOD
    for at, cut, insert in muts:
        at = min(at, len(text))
        text = text[:at] + insert + text[at + cut:]
    path = tmp_path / "m.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    rc = main(["validate", str(path)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if rc == 0:
        assert err == ""
    else:
        assert rc == 2
        lines = err.strip().splitlines()
        assert lines and all(l.startswith(f"{path}:") and LINE.match(l) for l in lines), lines
