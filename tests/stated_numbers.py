"""Reading the numbers a sentence states, to compare them with numbers a test computed from the engine.

A sentence's numbers are matched in order and to the precision they are printed with ("0.43" is any value
in [0.425, 0.435]), so a test survives a change of wording but not a wrong number. ``TINY`` stands for a
rounding-error-sized number ("1e-16", "0"): the sentence must state one there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ui.charts.numbers import group_mark

TINY = "tiny"  # an expected rounding error: a stated number of at most TINY_LIMIT
TINY_LIMIT = 1e-9

# 20,480 | -0.087 | 0.25 | 1e-16 | 6% ; a minus sign counts only when it touches the digit ("smallest -0.087",
# never "0.116 − 0.508"); "0..5" is 0 and 5.
NUMBER = re.compile(r"(?<!\w)(?<!\d\.)([-−]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(e[-+−]?\d+)?(%?)")

# A count in another language's grouping (ui/charts/numbers.py ``count``: es writes 49152 as "49 152"): a
# first group without a leading zero, whole groups of three, and no more digits or exponent after it, so a
# decimal ("0.1234", "0.125", "1.5e-16") is never read as one. Read by dropping the group marks.
def _grouped(group: str) -> re.Pattern:
    return re.compile(rf"(?<![\w.])[1-9]\d{{0,2}}(?:{re.escape(group)}\d{{3}})+(?!\d|e[-+−]?\d)")


@dataclass(frozen=True)
class Stated:
    """One number of a sentence, with the half-width of the interval its printed digits stand for."""

    value: float
    half_unit: float
    text: str


def numbers_in(text: str, lang: str = "en") -> list[Stated]:
    """Every number of ``text`` in order, each with its printed precision; counts grouped as ``lang`` groups
    digits (``count``: Spanish's narrow space, which no decimal carries) are read as the integers they are."""
    group = group_mark(lang)
    if group == ",":
        return _numbers(text)
    found, at = [], 0
    for match in _grouped(group).finditer(text):
        value = int(match.group(0).replace(group, ""))
        found += _numbers(text[at : match.start()]) + [Stated(float(value), 0.5, match.group(0))]
        at = match.end()
    return found + _numbers(text[at:])


def _numbers(text: str) -> list[Stated]:
    found = []
    for match in NUMBER.finditer(text):
        sign, whole, fraction, exponent, _ = match.groups()
        digits = whole.replace(",", "") + (fraction or "")
        power = int(exponent[1:].replace("−", "-")) if exponent else 0
        value = float(digits) * 10.0**power * (-1 if sign else 1)
        decimals = len(fraction) - 1 if fraction else 0
        found.append(Stated(value, 0.5 * 10.0 ** (power - decimals), match.group(0)))
    return found


def matches(stated: Stated, expected) -> bool:
    if expected == TINY:
        return abs(stated.value) <= TINY_LIMIT
    return abs(stated.value - float(expected)) <= stated.half_unit * (1 + 1e-9) + 1e-12


def assert_states(text: str, expected: list) -> None:
    """``text`` states every number of ``expected``, in this order (other numbers may stand between them)."""
    found = numbers_in(text)
    at = 0
    for value in expected:
        while at < len(found) and not matches(found[at], value):
            at += 1
        assert at < len(found), (f"the sentence does not state {value!r} (after the numbers already matched): "
                                 f"{text!r}; expected in order {expected}")
        at += 1


def ints_after(text: str, word: str) -> list[int]:
    """The integers that follow ``word`` in ``text``: ints_after('head 2 and head 0', 'head') == [2, 0]."""
    return [int(m) for m in re.findall(rf"{word}\s+(\d+)", text)]



def softmax_row(logits: np.ndarray) -> np.ndarray:
    """A softmax over the last axis, written out here for the tests' own recomputations (−∞ cells get 0)."""
    peak = np.max(logits, axis=-1, keepdims=True)
    e = np.exp(np.asarray(logits, dtype=np.float64) - peak)
    return e / e.sum(axis=-1, keepdims=True)


def rope_turned(vector: np.ndarray, position: int, base: float) -> np.ndarray:
    """RoPE written out here, half-split (feature f paired with f + d/2) and turned by position · base^(−2f/d)."""
    d = vector.shape[-1]
    angles = position * base ** (-np.arange(0, d, 2) / d)
    x, y = vector[: d // 2], vector[d // 2 :]
    return np.concatenate([x * np.cos(angles) - y * np.sin(angles), x * np.sin(angles) + y * np.cos(angles)])
