"""YAML tags on values and on keys, generated: the plain tags with text that does not parse
as them (`!!bool maybe`, `!!int ""`, `!!timestamp notatime`) and tags that are not allowed.
The reader must answer with located one-line problems, never a traceback."""
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.scenario import check
from lineage.scenario.problems import ScenarioError
from lineage.scenario.reader import load_text

LINE = re.compile(r"^m\.yaml:\d+:\d+: ")
GOOD = "version: 1\ntitle: t\nmodel: {preset: tiny-kda}\ninput: {text: hello}\n"
TAGS = ["!!bool", "!!int", "!!float", "!!str", "!!null", "!!timestamp", "!!binary", "!!python/name:os.system",
        "!!set", "!!omap", "!!map", "!!seq", "!custom", "!", "!!merge", "!!value"]
# plain scalars only (quoted where YAML needs it), so the tag is what is tested, not the syntax
scalar = st.sampled_from(["maybe", '""', "''", "x", "1", "-0", "0x1G", "1e999", ".nan", "2026-13-45", "notatime",
                          "yes", "~", "12:30", "'a b'", "\"\\x00\"", "0b102", "1_0"])


def _located(text: str) -> None:
    try:
        check(load_text(text, "m.yaml"))
    except ScenarioError as e:
        assert e.problems and all(LINE.match(str(p)) and "\n" not in str(p) for p in e.problems), e.problems


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(TAGS), scalar, st.sampled_from(["title", "steps", "version", "device", "note"]))
def test_tagged_values(tag, value, key):
    _located(GOOD + f"{key}: {tag} {value}\n".replace("title", "description") if key == "title" else
             GOOD + f"{key}: {tag} {value}\n")


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(TAGS), scalar, st.sampled_from(["", "  ", "model: {", "input: {"]))
def test_tagged_keys(tag, value, where):
    if where.endswith("{"):                 # a tagged key inside a flow mapping
        body = GOOD.replace(where, f"{where}{tag} {value}: 1, ", 1)
    else:
        body = GOOD + f"{where}{tag} {value}: 1\n"
    _located(body)


def test_the_reported_cases():
    for line in ["note: !!bool maybe", "note: !!timestamp notatime", "!!int x: 1", "!!float y: 2",
                 'note: !!int ""', "!!bool maybe: 1"]:
        try:
            load_text(GOOD + line + "\n", "m.yaml")
        except ScenarioError as e:
            assert "is not a valid" in str(e) and LINE.match(str(e)), str(e)
        else:
            raise AssertionError(f"{line!r} was accepted")
