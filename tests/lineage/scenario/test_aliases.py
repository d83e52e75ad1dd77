"""A scenario that aliases one long string thousands of times is read, checked and refused at
the cost of the string once, not once per alias (a 930 KB file aliasing a 900 KB string 10,000
times took 36 s to validate). Generated files; work is counted (characters scanned for control
characters, bytes allocated), never timed."""
import tracemalloc

import pytest

import lineage.scenario.reader as reader
from lineage.scenario import loads
from lineage.scenario.problems import ScenarioError

BASE = "version: 1\ntitle: t\nmodel: {preset: tiny-kda}\ninput: {text: hello there}\npanels: [{kind: tokens}]\n"


@pytest.fixture
def scanned(monkeypatch):
    """Characters the reader scanned for control characters, in all."""
    n = [0]
    real = reader.first_control

    def counted(s):
        n[0] += len(s)
        return real(s)
    monkeypatch.setattr(reader, "first_control", counted)
    return n


def _anchored(s: str) -> str:
    return f'description: &s "{s}"\n'


def test_ten_thousand_aliases_of_a_900_kb_string_are_scanned_once(scanned):
    text = _anchored("ab " * 300_000) + BASE.replace("input: {text: hello there}",
                                                     "input: {ids: [" + ", ".join(["*s"] * 10_000) + "]}")
    assert 900_000 < len(text) < reader.MAX_FILE_BYTES
    with pytest.raises(ScenarioError) as e:
        loads(text, "big.yaml")
    lines = str(e.value).splitlines()
    assert lines and all(line.startswith("big.yaml:") and len(line) < 300 for line in lines)
    assert "input.ids[19]: expected an integer, got 'ab ab ab" in lines[-2]     # the first 20 said,
    assert lines[-1] == "big.yaml: and 9,980 more problems (the first 20 are shown)"   # then how many more
    assert "input.ids[9999]: expected an integer, got 'ab ab ab" in str(e.value.problems[-1])   # all kept
    assert scanned[0] < 2 * len(text)          # once per string: 10,000 times would be 9 GB of scanning


def test_a_thousand_aliased_captions_validate_at_the_cost_of_one(scanned):
    caption = "word " * 390                                       # 1,950 characters: under the 2,000 limit
    text = _anchored(caption) + BASE + "captions:\n" + "".join("- {at: 0, text: *s}\n" for _ in range(1000))
    sc = loads(text, "captions.yaml")
    assert len(sc.captions) == 1000 and sc.captions[999].text == caption
    assert scanned[0] < 2 * len(text)


def test_a_refused_list_of_aliases_is_quoted_by_its_start_only():
    """Pydantic hands the whole list back with its error; quoting it must not repr every alias
    (1,001 aliases of a 200 KB string: 200 MB of repr, to show 40 characters)."""
    text = _anchored("ab " * 70_000) + BASE + "captions:\n" + "".join("- {at: 0, text: *s}\n" for _ in range(1001))
    tracemalloc.start()
    try:
        with pytest.raises(ScenarioError) as e:
            loads(text, "many.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    [line] = str(e.value).splitlines()
    assert line.startswith("many.yaml:") and "captions: too long (limit 1,000 items), got [{'at': 0" in line
    assert peak < 64 << 20, f"{peak / 2**20:.0f} MiB allocated"


@pytest.mark.parametrize("where", ["model: {preset: *s}", "model: {preset: tiny-kda, overrides: {*s : 1}}",
                                   "figure: {kind: *s}"])
def test_a_problem_quoting_a_900_kb_value_is_still_a_short_line(where):
    key = where.split(":")[0]
    rest = "\n".join(line for line in BASE.splitlines() if not line.startswith(key + ":"))
    with pytest.raises(ScenarioError) as e:
        loads(_anchored("ab " * 300_000) + rest + "\n" + where + "\n", "long.yaml")
    lines = str(e.value).splitlines()
    assert lines and all(line.startswith("long.yaml:1:14: ") and len(line) < 1200 for line in lines), \
        [len(line) for line in lines]
