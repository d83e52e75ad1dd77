"""Generated inputs that make memory visible: two facts, associative recall, a topic shift.

A task yields two views of the same lesson:
- `events` for bare memories (one write or read per step, with explicit key and value ids), and
- `tokens` for language models (a key token then its value token, queries as key tokens).
"""
from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    kind: str            # 'write', 'read' or 'sep'
    key: int = -1        # key id (row of the key table)
    value: int = -1      # value id (row of the value table)
    beta: float = 0.0    # write strength
    gate: float = 0.0    # log decay applied before this step (a separator's forgetting)

    def label(self) -> str:
        if self.kind == "write":
            return f"write k{self.key} -> v{self.value}"
        if self.kind == "read":
            return f"read k{self.key}"
        return f"separator (g = {self.gate:g})"


@dataclass(frozen=True)
class TaskSequence:
    events: list[Event]
    tokens: list[int]                    # the same lesson as token ids
    n_keys: int
    n_values: int
    answers: dict[int, int]              # token position -> expected next token (queries)


def _letters(i: int, base: int, vocab: int) -> int:
    """Key / value ids as readable bytes when the vocabulary is small enough for letters."""
    return (ord("a") + i if base == 0 else ord("A") + i) if vocab <= 52 else base + i


def _values(rng: random.Random, n: int, half: int, distinct: bool) -> list[int]:
    """n value ids drawn with replacement, or (distinct) all different while the half-vocabulary has room."""
    if distinct and n <= half:
        return rng.sample(range(half), n)
    return [rng.randrange(half) for _ in range(n)]


def generate(task) -> TaskSequence:
    """The events and tokens of a task spec (schema.TwoFacts, MQAR or TopicShift, told apart by `kind`)."""
    if task.kind == "two_facts":
        ev = [Event("write", 0, 0, task.beta), Event("write", 1, 1, task.beta), Event("read", 0), Event("read", 1)]
        toks = [ord("a"), ord("A"), ord("b"), ord("B"), ord("a"), ord("b")]
        return TaskSequence(ev, toks, 2, 2, {4: ord("A"), 5: ord("B")})
    rng = random.Random(task.seed)
    half = task.vocab // 2
    if task.kind == "mqar":
        n = min(task.pairs, half)
        # distinct values while there are enough: a repeated value lets a confused key read "right"
        keys, vals = rng.sample(range(half), n), _values(rng, n, half, task.distinct_values)
        order = rng.sample(range(n), n)
        ev = [Event("write", k, v, task.beta) for k, v in zip(keys, vals)] + [Event("read", keys[i]) for i in order]
        toks, answers = [], {}
        for k, v in zip(keys, vals):
            toks += [_letters(k, 0, task.vocab), _letters(v, half, task.vocab)]
        for i in order:
            answers[len(toks)] = _letters(vals[i], half, task.vocab)
            toks.append(_letters(keys[i], 0, task.vocab))
        return TaskSequence(ev, toks, half, half, answers)
    assert task.kind == "topic_shift"
    n = min(task.pairs, half // 2)
    keys = rng.sample(range(half), 2 * n)
    vals = _values(rng, 2 * n, half, task.distinct_values)
    first, second = list(zip(keys[:n], vals[:n])), list(zip(keys[n:], vals[n:]))
    ev = [Event("write", k, v, task.beta) for k, v in first]
    ev.append(Event("sep", gate=task.separator_gate))
    ev += [Event("write", k, v, task.beta) for k, v in second]
    ev += [Event("read", k) for k, _ in first]
    sep_token = ord("|") if task.vocab <= 52 else task.vocab - 1
    toks, answers = [], {}
    for k, v in first:
        toks += [_letters(k, 0, task.vocab), _letters(v, half, task.vocab)]
    toks.append(sep_token)
    for k, v in second:
        toks += [_letters(k, 0, task.vocab), _letters(v, half, task.vocab)]
    for k, v in first:
        answers[len(toks)] = _letters(v, half, task.vocab)
        toks.append(_letters(k, 0, task.vocab))
    return TaskSequence(ev, toks, half, half, answers)
