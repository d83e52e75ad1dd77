"""A slide lands where its caption is true: every number a caption writes (as
tests/lineage/scenario/test_caption_truth.py reads them) is printed, at the step its slide
shows, by the panels that slide shows (the caption's own panel where it names one)."""
from __future__ import annotations

import re

import pytest

from lineage.playback.session import Session, caption_at
from lineage.scenario import load
from tests.lineage.scenario.test_caption_truth import DERIVED, LESSONS, SC, _matches, _numbers, _shown_numbers
from lineage.app.headless import slide_kinds
from lineage.app.panels import render
from lineage.app.snapshot import slide_step


PERCENT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)%")


def _percent_shown(word: str, shown: list[float]) -> bool:
    """A share a caption writes as 35% may be printed as 35% or as a weight of 0.35."""
    d = len(word.split(".")[1]) if "." in word else 0
    return _matches(word, shown) or _matches(f"{float(word) / 100:.{d + 2}f}", shown)


# the scenarios with captions beyond the lessons (language models, slower to step)
MODELS = ["tour", "tour_random", "two_timescales", "forgetting", "forgetting_gone", "attention_recall",
          "lineage_compare", "lineage_compare_random", "long_document"]
# numbers a slide cannot show, by scenario and the caption's first step, each with why
ELSEWHERE = {
    ("forgetting_gone", 205): {"5.0", "2.2"},      # the norms "at the end of the first segment", on its steps
    # held-out rates from `lineage eval`, which no frame holds
    ("forgetting_gone", 213): {"4.3", "4.5", "95.5", "99.1", "99.8", "4.3%", "4.5%", "95.5%", "99.1%", "99.8%"},
}


def _wrong_on_slides(name: str) -> list[str]:
    s = Session(load(SC / f"{name}.yaml"))
    try:
        caps = [c for c in s.info["captions"] if c["at"] < s.total]
        wrong = []
        for c in caps:
            i = slide_step(caps, c, s.total)
            kinds = slide_kinds(s.info, i)
            kind = kinds[0] if kinds else None
            shown = _shown_numbers(render(s, i, kind).split("\nnote:")[0])
            missing = [w for w in _numbers(c["text"]) if w not in DERIVED.get(name, set()) and not _matches(w, shown)]
            missing += [w + "%" for w in PERCENT.findall(c["text"])
                        if w not in DERIVED.get(name, set()) and not _percent_shown(w, shown)]
            missing = [w for w in missing if w not in ELSEWHERE.get((name, c["at"] + 1), set())]
            if missing:
                wrong.append(f"{name} caption at step {c['at'] + 1}: {missing} not on its slide "
                             f"(step {i + 1}, {kind or 'every'} panel)")
        return wrong
    finally:
        s.close()


@pytest.mark.parametrize("name", LESSONS + MODELS)
def test_each_slide_shows_the_numbers_its_caption_states(name):
    wrong = _wrong_on_slides(name)
    assert not wrong, "\n".join(wrong)


NAMED_STEP = re.compile(r"\bat step (\d+)\b", re.IGNORECASE)


def _wrong_while_shown(name: str) -> list[str]:
    """A caption stays on screen from its first step to its last: a number it states must be
    printed at every one of them (by the panels its slide shows), or the caption names the
    one step it is about ("at step 25, the output reads 35%"), which is then checked alone."""
    s = Session(load(SC / f"{name}.yaml"))
    try:
        caps = [c for c in s.info["captions"] if c["at"] < s.total]
        wrong = []
        for c in caps:
            words = [w for w in _numbers(c["text"]) if w not in DERIVED.get(name, set())]
            shares = [w for w in PERCENT.findall(c["text"]) if w not in DERIVED.get(name, set())]
            words = [w for w in words if w not in ELSEWHERE.get((name, c["at"] + 1), set())]
            shares = [w for w in shares if w + "%" not in ELSEWHERE.get((name, c["at"] + 1), set())]
            if not words and not shares:
                continue                               # nothing to read off the screen
            named = [int(n) - 1 for n in NAMED_STEP.findall(c["text"])]
            # on screen until its `until`, else until the next caption starts (caption_at)
            steps = named or [i for i in range(c["at"], s.total) if caption_at(caps, i) is c]
            for i in steps:
                kinds = slide_kinds(s.info, i)
                shown = _shown_numbers(render(s, i, kinds[0] if kinds else None).split("\nnote:")[0])
                missing = [w for w in words if not _matches(w, shown)]
                missing += [w + "%" for w in shares if not _percent_shown(w, shown)]
                if missing:
                    wrong.append(f"{name} caption at step {c['at'] + 1}: {missing} not on screen at step {i + 1}")
                    break
        return wrong
    finally:
        s.close()


@pytest.mark.parametrize("name", LESSONS + MODELS)
def test_a_captions_numbers_hold_on_every_step_it_is_shown(name):
    wrong = _wrong_while_shown(name)
    assert not wrong, "\n".join(wrong)
