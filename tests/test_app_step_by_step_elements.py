"""Step by step sends about half the elements it used to on every run (issue 38), with the same content for the reader:

- each step's heading, words and formula are ONE markdown element, its heading an h3 with the step's anchor (the
  "Jump to" links and a link's ``#softmax`` find it, in every language);
- the downloads (each step's CSV, the run's .npz) and the masked-row policy are sent only while their expander is
  open, and then every step with matrices has its CSV, whose numbers are the engine's;
- a token never becomes HTML in the step's markdown (it allows HTML for its heading).
"""

from __future__ import annotations

import pytest
from shown_steps import open_downloads, step_anchors, step_texts, step_titles
from test_app_step_by_step import open_page
from test_stated_numbers_downloads import blocks, csv, offered, opened, same  # noqa: F401 (offered: a fixture)

from mha_core.attention import merge_heads
from mha_core.config import MHAConfig, run
from tests.sidebar_controls import control
from ui.pipeline.records import step_inputs
from ui.pipeline.steps import FULLY_MASKED_POLICY, build_steps
from ui.widgets.step_views import without_html

POLICY = FULLY_MASKED_POLICY[:60]


def download_keys(at) -> list[str]:
    return [b.proto.id.rsplit("-", 1)[-1] for b in at.main.get("download_button")]


def test_each_steps_words_are_under_its_anchor_in_its_runs_element_and_the_jump_links_find_it():
    at = open_page(mask="causal", seed=3)
    steps = build_steps(step_inputs(run(MHAConfig(mask="causal", seed=3))), 0, (0, 0))
    assert step_anchors(at) == [step.slug for step in steps]
    assert [t.split(". ", 1)[1] for t in step_titles(at)] == [step.title for step in steps]
    jump = next(m.value for m in at.main.markdown if m.value.startswith("**Jump to:**"))
    links = [part.split("](#")[1].rstrip(")") for part in jump.split(" · ")]
    assert links == [step.slug for step in steps] + ["drill-down"]
    for text, step in zip(step_texts(at), steps, strict=True):  # the words and the formula in the heading's element
        assert (step.why or "")[:40] in text and (not step.formula or f"$$\n{step.formula}\n$$" in text)
    assert not at.main.subheader and not at.main.latex  # no separate heading or formula element left


def test_the_downloads_and_the_policy_are_sent_only_once_opened_and_hold_the_engines_numbers(offered):  # noqa: F811
    at = open_page(mask="causal", seed=3)
    assert download_keys(at) == ["dl_notebook"]  # closed: only the notebook, the steps' ten buttons never sent
    assert not any(POLICY in m.value for m in at.main.markdown)
    at.session_state["sbs_masked_policy"] = True
    at = open_downloads(at)
    assert any(POLICY in m.value for m in at.main.markdown)
    result = run(MHAConfig(mask="causal", seed=3))
    steps = build_steps(step_inputs(result), 0, (0, 0))
    keys = [f"sbs_dl_{step.slug}" for step in steps if step.panels]
    assert download_keys(at) == ["dl_notebook", "sbs_dl_npz", *keys]
    assert all(callable(data) for _label, data in offered.values())  # a file is built on a click, never on a run
    files = opened(offered)
    trace = result.trace
    # each step's button holds its own step's matrices, the engine's arrays (its first block, and its last)
    expected = {"input": (result.embeddings,) * 2, "qkv": (result.weights.w_q, merge_heads(trace.v)),
                "split": (trace.q[0], trace.v[0]),
                "scores": (trace.scores[0], trace.scores[0]), "scale": (trace.scores[0] * trace.scale,) * 2,
                "mask": (result.mask, trace.logits[0]), "softmax": (trace.weights[0],) * 2,
                "mix": (trace.heads[0],) * 2, "concat": (trace.concat,) * 2, "output": (result.weights.w_o, trace.output)}
    assert set(expected) == {step.slug for step in steps if step.panels}
    for number, step in enumerate(steps, start=1):
        if not step.panels:
            continue
        label, data = files[f"sbs_dl_{step.slug}"]
        assert label == f"Step {number}'s matrices (CSV)"
        shown = list(blocks(csv(data, 2)).items())
        for (title, block), array in zip((shown[0], shown[-1]), expected[step.slug], strict=True):
            same(block, array, f"{step.slug}: {title}")


@pytest.mark.parametrize("text, shown", [
    ("a <b>bold</b> token", "a &lt;b>bold&lt;/b> token"),
    ("`<kept in code>` and $a<b$ and $$\nx<y\n$$ but <i>", "`<kept in code>` and $a<b$ and $$\nx<y\n$$ but &lt;i>"),
    ("no tag here: 1 -> 2", "no tag here: 1 -> 2"),
])
def test_a_step_words_never_open_a_tag(text, shown):
    assert without_html(text) == shown


def test_a_prediction_still_open_keeps_the_weights_out_of_the_downloads(offered):  # noqa: F811
    """Predict, then reveal: until the reveal, the softmax step's CSV and the .npz (both hold the weights) are not
    offered, and a line says why; revealed, they are back, and the CSV holds the followed head's weights."""
    at = open_page(mask="causal", seed=3, head=1)
    control(at, "w_sbs_predict").set_value(True).run()
    at = open_downloads(at)
    keys = download_keys(at)
    assert "sbs_dl_softmax" not in keys and "sbs_dl_npz" not in keys
    assert {"sbs_dl_scores", "sbs_dl_mix"} <= set(keys)  # the other steps' files stay
    assert any("left out until the prediction is revealed" in c.value for c in at.main.caption)
    at.button(key="sbs_reveal").click().run()
    keys = download_keys(at)
    assert "sbs_dl_softmax" in keys and "sbs_dl_npz" in keys
    assert not any("left out until the prediction is revealed" in c.value for c in at.main.caption)
    label, data = opened(offered)["sbs_dl_softmax"]
    weights = run(MHAConfig(mask="causal", seed=3)).trace.weights[1]
    (block,) = blocks(csv(data, 2)).values()
    same(block, weights, "softmax CSV after the reveal")
