"""The Heads page's per-head diagnostics under every kernel, recomputed here from the engine's weights.

"What each head does" (the table, in a section drawn only while open), its CSV (built on click, the section closed)
and presentation mode's per-head numbers are compared with loops over ``trace.weights``. A differential head's weights A₁ − λA₂ are signed and a row sums to 1 − λ:
such a row is no probability distribution, so no entropy of it may be shown anywhere.
"""

from __future__ import annotations

import numpy as np
import pytest
from shown_charts import charts, decode
from test_stated_numbers_downloads import csv, engine, offered, open_page, opened  # noqa: F401 (offered: a fixture)

from mha_core.diagnostics import head_summary, normalized_entropy

PARAMS = {"tokens": "the cat sat on the mat", "d_model": "16", "heads": "4", "seed": "3", "mask": "causal"}
KERNELS = ("softmax", "linear", "differential")
HEAD = 2  # the head presentation mode shows
SECTION = "diagnostics_open"  # the key of the section's expander: True once a click has opened it


def open_section(at):
    """Open "What each head does" as a click on its header does (it reruns the page), and return the page."""
    at.session_state[SECTION] = True
    at.run()
    assert not at.exception, at.exception
    return at


def head_tables(at) -> list:
    """The per-head tables shown (a table without selection has no element id: found by a column only it has)."""
    return [d.value for d in at.main.dataframe if "mean row max" in d.value.columns]


def expected_stats(trace) -> dict[str, np.ndarray]:
    """Per head, a loop over the rows that see a key: entropy / log(keys seen) (rows seeing one key left out), the
    row's largest weight, the weight on key i, on key i - 1 and on key 0. Entropy only for rows without negatives."""
    weights, seen = trace.weights, np.isfinite(trace.logits)
    nh, tq, _ = weights.shape
    out = {name: np.zeros(nh) for name in ("mean row max", "on itself", "on previous", "on first token")}
    if (weights >= 0).all():
        out["entropy"] = np.zeros(nh)
    for h in range(nh):
        rows = [i for i in range(tq) if seen[h, i].any()]
        if "entropy" in out:
            ent = []
            for i in rows:
                w = weights[h, i][weights[h, i] > 0]
                if seen[h, i].sum() > 1:
                    ent.append(-(w * np.log(w)).sum() / np.log(seen[h, i].sum()))
            out["entropy"][h] = np.mean(ent)
        out["mean row max"][h] = np.mean([weights[h, i].max() for i in rows])
        out["on itself"][h] = np.mean([weights[h, i, i] for i in rows])
        out["on previous"][h] = np.mean([weights[h, i, i - 1] for i in rows if i >= 1])
        out["on first token"][h] = np.mean([weights[h, i, 0] for i in rows])
    return out


@pytest.mark.parametrize("kernel", KERNELS)
def test_table_and_csv_show_the_engines_per_head_numbers_and_no_entropy_of_signed_rows(kernel, offered):  # noqa: F811
    params = {**PARAMS, "kernel": kernel}
    trace = engine(params).trace
    signed = bool((trace.weights < 0).any())
    assert signed == (kernel == "differential")  # the differential rows here do hold negative weights
    expected = expected_stats(trace)
    at = open_page("heads", params)
    assert not head_tables(at)  # the section is closed: the CSV below is built on click all the same
    saved = csv(opened(offered)["dl_summary"][1], 1)
    (table,) = head_tables(open_section(at))
    assert list(table.index) == list(saved.index) == [f"head {h}" for h in range(trace.n_heads)]
    assert set(saved.columns) == set(expected)  # the CSV holds exactly the measures that are defined
    for column, values in expected.items():
        np.testing.assert_allclose(table[column].to_numpy(float), values, rtol=0, atol=1e-12, err_msg=column)
        np.testing.assert_allclose(saved[column].to_numpy(float), values, rtol=1e-7, atol=1e-9, err_msg=column)
    captions = next(m.value for m in at.markdown if "Cosine similarity of two heads" in m.value)  # its words
    if signed:
        assert (table["entropy"] == "—").all()  # a column that says where the entropy went, with no number in it
        total = 1 - trace.kernel_parts.lam
        assert f"each row sums to 1 − λ = {total:.3f} here" in captions and "No entropy (—)" in captions
        assert "Entropy 0 = sharp" not in captions
    else:
        assert "Entropy 0 = sharp, 1 = even." in captions


def test_the_section_is_closed_by_default_sends_nothing_and_opened_shows_the_engines_numbers():
    """Closed, "What each head does" is its header alone: no table, no similarity chart, none of its words (each
    element a message every Seed + sent again, issue 38). Opened, the table holds the engine's per-head numbers
    and the chart the heads' similarity."""
    at = open_page("heads", PARAMS)
    (header,) = [e for e in at.main.expander if e.label.startswith("**What each head does**")]
    assert header.label == "**What each head does**: entropy, focus and which heads look alike"
    assert not at.session_state[SECTION]
    assert not head_tables(at) and "similarity" not in charts(at)
    assert not any("Cosine similarity of two heads" in m.value for m in at.markdown)
    open_section(at)
    (table,) = head_tables(at)
    trace = engine(PARAMS).trace
    for column, values in expected_stats(trace).items():
        np.testing.assert_allclose(table[column].to_numpy(float), values, rtol=0, atol=1e-12, err_msg=column)
    unit = trace.weights.reshape(trace.n_heads, -1)
    unit = unit / np.linalg.norm(unit, axis=1, keepdims=True)  # cosine of every pair of heads, by hand
    np.testing.assert_allclose(decode(charts(at)["similarity"]["data"][0]["z"]), unit @ unit.T, rtol=0, atol=1e-6)


@pytest.mark.parametrize("kernel", KERNELS)
def test_presentation_mode_states_the_heads_entropy_and_row_max_or_a_dash_for_signed_rows(kernel):
    params = {**PARAMS, "kernel": kernel}
    expected = expected_stats(engine(params).trace)
    at = open_page("heads", {**params, "present": "1", "head": str(HEAD)})
    metrics = {m.label: m for m in at.metric}
    assert metrics["mean row max"].value == f"{expected['mean row max'][HEAD]:.2f}"
    if "entropy" in expected:
        assert metrics["entropy"].value == f"{expected['entropy'][HEAD]:.2f}"
    else:
        assert metrics["entropy"].value == "—"
        assert "no probability distribution" in metrics["entropy"].help
        assert "signed" in metrics["mean row max"].help


def test_the_engine_gives_no_entropy_of_a_signed_row():
    weights = np.array([[[0.9, -0.1], [0.5, 0.3]]])  # (1, 2, 2): a row of 0.8 with a negative weight
    fully_masked = np.zeros((1, 2), dtype=bool)
    with pytest.raises(ValueError, match="at least 0"):
        normalized_entropy(weights, fully_masked)
    summary = head_summary(weights, fully_masked, distributions=False)
    assert "entropy" not in summary
    np.testing.assert_allclose(summary["first"], [0.7], rtol=0, atol=1e-12)  # signed weights as they are
    np.testing.assert_allclose(summary["max_weight"], [0.7], rtol=0, atol=1e-12)
