"""Predict, then reveal: a guess is right exactly for the row's largest weight (ties included)."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mha_core.config import MHAConfig, run
from ui.pipeline.predict import check_prediction, prediction_message


def test_check_prediction_right_wrong_and_ties():
    row = np.array([0.1, 0.7, 0.2])
    assert check_prediction(row, 1).correct
    wrong = check_prediction(row, 0)
    assert not wrong.correct and wrong.best == (1,) and wrong.best_weight == 0.7
    tie = check_prediction(np.array([0.5, 0.5, 0.0]), 1)
    assert tie.correct and tie.best == (0, 1)


def test_check_prediction_on_a_fully_masked_row_has_no_right_answer():
    check = check_prediction(np.zeros(4), 2, fully_masked=True)
    assert not check.correct and check.best == ()
    assert "every key masked" in prediction_message(check, "0:the", ["a", "b", "c", "d"])


def test_check_prediction_rejects_a_guess_outside_the_row():
    with pytest.raises(ValueError, match="choose 0 to 2"):
        check_prediction(np.array([0.2, 0.3, 0.5]), 3)


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12), st.data())
def test_check_prediction_is_right_exactly_for_the_row_maximum(values, data):
    row = np.array(values)
    guess = data.draw(st.integers(0, len(values) - 1))
    check = check_prediction(row, guess)
    if row.max() == 0:
        assert check.best == ()
    else:
        assert int(np.argmax(row)) in check.best
        assert check.correct == (row[guess] >= row.max() - 1e-9)


def test_prediction_message_names_the_right_answer():
    labels = ["0:the", "1:cat", "2:sat"]
    right = prediction_message(check_prediction(np.array([0.2, 0.5, 0.3]), 1), "2:sat", labels)
    wrong = prediction_message(check_prediction(np.array([0.2, 0.5, 0.3]), 2), "2:sat", labels)
    assert right.startswith("**Right!**") and "`1:cat`" in right
    assert wrong.startswith("**Not this time.**") and "`2:sat`" in wrong and "goes to `1:cat`" in wrong


def test_predicting_on_a_real_row_agrees_with_the_engines_argmax():
    result = run(replace(MHAConfig(), seed=7, mask="window", window=1))
    weights = result.trace.weights[2, 3]
    best = int(np.argmax(weights))
    assert check_prediction(weights, best).correct
    assert not check_prediction(weights, 0 if best else 1).correct
