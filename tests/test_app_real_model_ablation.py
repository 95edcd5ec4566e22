"""The SmolLM2 view's "Turn heads off" in AppTest: the link restores the heads and the mode, bad values get a
message and a fallback, and the shown probabilities, KL and loss are the engine's ablated run's, recomputed
here from its logits with NumPy (never with the page's builders). In Spanish and Chinese the words change and
the numbers do not."""

from __future__ import annotations

import base64
import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from mha_core import smollm2_ablation as ab
from tests.address_bar import address
from tests.app_opener import open_app
from ui.i18n import _ as translate
from ui.i18n import using_language
from ui.pages.real_model.smollm2 import DEFAULT_PROMPT

PAGE = "app_pages/real_model.py"
HEADS = ((5, 4), (11, 0))
LINK = {"model": "smollm2", "rm_off": "11.0,5.4", "rm_off_mode": "mean"}


def page(params: dict[str, str]) -> AppTest:
    return open_app(PAGE, timeout=180, **params)


def table(at: AppTest, key: str):
    """The before/after table: the first sorted by 'before', the second by 'after'."""
    frames = [d.value for d in at.dataframe if "change" in d.value.columns]
    assert len(frames) == 2
    return frames[0] if key == "before" else frames[1]


def softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64) - np.max(logits)
    return np.exp(z) / np.exp(z).sum()


@pytest.fixture(scope="module")
def expected(smollm2):
    """The engine's ablated run for LINK, and the clean one."""
    run = smollm2.forward(DEFAULT_PROMPT, traces=())
    return run, ab.ablate(smollm2, run, HEADS, "mean", means=ab.head_means(smollm2))


@pytest.fixture(scope="module")
def linked(smollm2) -> AppTest:
    return page(LINK)


def test_the_link_restores_heads_and_mode(linked):
    assert linked.multiselect(key="w_sm_off").value == [5 * 9 + 4, 11 * 9 + 0]
    assert linked.segmented_control(key="w_sm_off_mode").value == "mean"
    assert address(linked)["rm_off"] == "5.4,11.0"  # written back sorted
    assert address(linked)["rm_off_mode"] == "mean"


def test_shown_probabilities_are_the_ablated_runs(linked, expected):
    run, result = expected
    before, after = softmax(run.next_logits), softmax(result.next_logits)
    for by, probs in (("before", before), ("after", after)):
        frame = table(linked, by)
        top = np.argsort(-probs, kind="stable")[: len(frame)]
        np.testing.assert_array_equal(frame["id"].to_numpy(), top)
        np.testing.assert_allclose(frame["before"].to_numpy(), before[top], atol=1e-9)
        np.testing.assert_allclose(frame["after"].to_numpy(), after[top], atol=1e-9)
    assert len(table(linked, "after")) == 10  # the 'Tokens shown' default


def test_kl_and_loss_sentence(linked, expected, smollm2):
    run, result = expected
    p, q = softmax(run.next_logits), softmax(result.next_logits)
    kl = float(np.sum(p * (np.log(p) - np.log(q))))
    text = next(m.value for m in linked.markdown if "KL(before ‖ after)" in m.value)
    assert f"KL(before ‖ after) = {kl:.4f} nats" in text
    logits = smollm2.logits(run)[:-1].astype(np.float64)
    top = logits.max(axis=1, keepdims=True)
    clean = np.mean(np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
                    - logits[np.arange(len(logits)), run.token_ids[1:]])
    assert f"Loss on the prompt: {clean:.3f} → {result.loss:.3f} nats" in text
    assert "Layers 5..29 ran again; layers 0..4 came from the cache." in text
    assert "2 heads off, each replaced by its mean over a reference text." in text


def test_choosing_heads_writes_the_link_and_clearing_removes_it(smollm2):
    at = page({"model": "smollm2"})
    assert "rm_off" not in address(at)
    assert any("No head is off" in i.value for i in at.info)
    at.multiselect(key="w_sm_off").set_value([3 * 9 + 2]).run()
    assert address(at)["rm_off"] == "3.2"
    assert "rm_off_mode" not in address(at)  # zero, the default, is not written
    assert any("1 head off, replaced by zero." in m.value for m in at.markdown)
    at.multiselect(key="w_sm_off").set_value([]).run()
    assert "rm_off" not in address(at)


def test_bad_link_values_get_messages_and_a_fallback(smollm2):
    at = page({"model": "smollm2", "rm_off": "5.4,abc,40.1,3.9", "rm_off_mode": "half"})
    warnings = " ".join(w.value for w in at.warning)
    assert "'abc' is not layer.head" in warnings
    assert "layer 40, head 1 does not exist" in warnings
    assert "layer 3, head 9 does not exist" in warnings
    assert "rm_off_mode" in warnings
    assert at.multiselect(key="w_sm_off").value == [5 * 9 + 4]
    assert at.segmented_control(key="w_sm_off_mode").value == "zero"


@pytest.mark.parametrize("lang", ["zh-CN", "es"])
def test_in_other_languages_words_change_and_numbers_do_not(linked, lang):
    other = page({**LINK, "lang": lang})
    with using_language(lang):
        title = translate("Turn heads off")
        heading = translate("Top tokens with the heads off")
    assert title != "Turn heads off" and title in [s.value for s in other.subheader]
    assert any(heading in m.value for m in other.markdown)
    for by in ("before", "after"):
        np.testing.assert_array_equal(table(other, by).select_dtypes("number").to_numpy(),
                                      table(linked, by).select_dtypes("number").to_numpy())
    english = next(m.value for m in linked.markdown if "KL(before ‖ after)" in m.value)
    translated = next(m.value for m in other.markdown if "KL(" in m.value)
    assert translated != english
    assert re.findall(r"\d+\.\d+", translated) == re.findall(r"\d+\.\d+", english)


# ---- MiniLM: the same link parameters, the encoder's vectors instead of a next token ----

MINILM_LINK = {"rm_off": "2.7,5.0", "rm_off_mode": "zero"}


def test_minilm_link_restores_heads_and_shows_the_engines_cosines(model):
    from mha_core import minilm_ablation as mab
    from ui.pages.real_model import DEFAULT_SENTENCE

    at = page(MINILM_LINK)
    assert at.multiselect(key="w_rm_off").value == [2 * 12 + 7, 5 * 12 + 0]
    assert address(at)["rm_off"] == "2.7,5.0"
    assert "rm_off_mode" not in address(at)  # zero is the default: the link drops it
    run = model.forward(DEFAULT_SENTENCE)
    result = mab.ablate(model, run, ((2, 7), (5, 0)))
    clean = run.layers[-1].output
    expected = np.sum(result.output * clean, axis=1) / (np.linalg.norm(result.output, axis=1)
                                                        * np.linalg.norm(clean, axis=1))
    frame = next(d.value for d in at.dataframe if "1 − cosine" in d.value.columns)
    assert list(frame["piece"]) == list(run.tokens)
    np.testing.assert_allclose(frame["cosine"].to_numpy(), expected, atol=1e-6)
    assert expected.min() < 0.9999  # the heads moved something
    sentence = result.output.mean(axis=0)
    cosine = float(sentence @ run.sentence_embedding() / np.linalg.norm(sentence))
    assert any(f"with the clean one: {cosine:.4f}." in m.value for m in at.markdown)


def test_minilm_bad_heads_fall_back(model):
    at = page({"rm_off": "2.7,6.0,1.12"})
    warnings = " ".join(w.value for w in at.warning)
    assert "layer 6, head 0 does not exist" in warnings and "layer 1, head 12 does not exist" in warnings
    assert at.multiselect(key="w_rm_off").value == [2 * 12 + 7]


# ---- head roles (SmolLM2): the table and the distribution are the scores of the probe's attentions ----


def test_head_roles_table_and_points_are_the_probes_scores(smollm2):
    from mha_core.head_roles import ROLES, THRESHOLD
    from tests.shown_charts import charts

    at = page({"model": "smollm2"})
    at.session_state["w_sm_roles"] = True  # what a click on the expander does
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    probe = smollm2.induction(half=24, seed=0)
    attentions, half = probe.attentions.astype(np.float64), probe.half
    t = 2 * half
    expected = {  # the page's definitions, written here as loops over queries
        "previous": np.mean([attentions[:, :, i, i - 1] for i in range(1, t)], axis=0),
        "induction": np.mean([attentions[:, :, i, i - half + 1] for i in range(half, t)], axis=0),
        "duplicate": np.mean([attentions[:, :, i, i - half] for i in range(half, t)], axis=0),
        "first": np.mean([attentions[:, :, i, 0] for i in range(1, t)], axis=0),
        "local": np.mean([attentions[:, :, i, i - 3:i + 1].sum(axis=-1) for i in range(3, t)], axis=0),
    }
    frame = next(d.value for d in at.dataframe if "heads" in d.value.columns and "example" in d.value.columns)
    best = np.stack([expected[key] for key in ROLES])  # (roles, L, nh)
    top = best.max(axis=0)
    named = np.where(top >= THRESHOLD, best.argmax(axis=0), -1)
    named = np.where((named == 4) & (expected["previous"] >= THRESHOLD), 0, named)
    for row, key in enumerate(ROLES):
        layer, head = np.unravel_index(np.argmax(expected[key]), expected[key].shape)
        assert frame["example"].iloc[row] == f"{layer}.{head}"
        assert frame["its score"].iloc[row] == pytest.approx(expected[key][layer, head], abs=1e-6)
        assert frame["heads"].iloc[row] == int((named == row).sum())
    assert frame["heads"].iloc[-1] == int((named == -1).sum())  # no clear role
    assert frame["heads"].sum() == 270
    figure = charts(at)["sm_roles_distribution"]
    for trace, key in zip(figure["data"][:5], ROLES, strict=True):
        shown = np.frombuffer(base64.b64decode(trace["y"]["bdata"]), trace["y"]["dtype"])  # 1-D: no shape
        np.testing.assert_allclose(shown, expected[key].ravel(), atol=1e-6)


# Rollout and flow, opened from their links on both models: tests/test_app_real_model_section_links.py.
