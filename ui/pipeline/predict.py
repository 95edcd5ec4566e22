"""Predict, then reveal: the verdict on a guess of the largest weight in a row, and the sentence that says it.

Pure builders, no streamlit (the Step-by-step page asks and reveals).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ui.charts.markdown import literal, literals
from ui.i18n import _, ngettext, sentences

TIE_TOLERANCE = 1e-9  # weights this close to the row maximum count as tied for the largest


@dataclass(frozen=True)
class PredictionCheck:
    """The verdict on a guess of the largest weight in one row."""

    correct: bool
    best: tuple[int, ...]  # every key tied for the largest weight (empty for a fully masked row)
    guess: int
    guess_weight: float
    best_weight: float


def check_prediction(weights_row: np.ndarray, guess: int, *, fully_masked: bool = False,
                     tol: float = TIE_TOLERANCE) -> PredictionCheck:
    """Was ``guess`` the key with the largest weight in this row? Ties within ``tol`` all count as right.

    A fully masked row has all weights 0 by our policy: no key is largest, so no guess is right.
    """
    row = np.asarray(weights_row, dtype=np.float64)  # (Tk,)
    if row.ndim != 1 or row.size == 0:
        raise ValueError(f"a row of weights must be a non-empty 1-D array, got shape {row.shape}")
    if not 0 <= guess < row.size:
        raise ValueError(f"guess {guess} is not a key of this row: choose 0 to {row.size - 1}")
    peak = float(row.max())
    if fully_masked or peak <= 0:
        return PredictionCheck(False, (), guess, float(row[guess]), peak)
    best = tuple(int(s) for s in np.flatnonzero(row >= peak - tol))
    return PredictionCheck(guess in best, best, guess, float(row[guess]), peak)


def prediction_message(check: PredictionCheck, query_label: str, key_labels: list[str]) -> str:
    """One or two sentences (Markdown) saying whether the guess was right and what the right answer was."""
    row = literal(query_label)
    guessed = _("{key} (weight {weight})").format(key=literal(key_labels[check.guess]),
                                                  weight=f"{check.guess_weight:.4f}")
    if not check.best:
        return _("Row {row} has every key masked: all its weights are 0 by our policy, so no key is largest.").format(
            row=row)
    names = literals(key_labels[s] for s in check.best)
    if check.correct:
        others = len(check.best) - 1
        tie = ngettext("It is tied with {n} other key: {names}.", "It is tied with {n} other keys: {names}.",
                       others).format(n=others, names=names) if others else ""
        right = _("**Right!** In row {row} the largest weight goes to {guessed}.").format(row=row, guessed=guessed)
        return sentences(right, tie)
    return _("**Not this time.** You chose {guessed}; the largest weight in row {row} goes to {names} "
             "(weight {weight}).").format(guessed=guessed, row=row, names=names, weight=f"{check.best_weight:.4f}")
