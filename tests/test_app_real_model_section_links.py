"""The Real model page's roles, rollout and flow sections open from a link with their choices (rm_roles, rm_flow,
rm_flow_layer, rm_flow_token, rm_flow_dir), on both models: AppTest opens each link and the view shown is compared
with the engine's attention arrays through definitions written here (the role scores as loops over queries,
rollout as the paper's recursion). Bad values get a message and a valid fallback. And switching models keeps each
model's heads off to itself: no spurious "does not exist", while a head that truly does not exist still warns."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import attention_flow as af
from mha_core import minilm_roles as mr
from tests.address_bar import address
from tests.app_opener import open_app
from tests.shown_charts import charts, decode
from tests.test_minilm_roles import definitions

PAGE = "app_pages/real_model.py"
SENTENCE = "Fish swim in rivers."


def page(**params):
    return open_app(PAGE, timeout=240, **params)


def warnings(at) -> list[str]:
    return [w.value for w in at.warning]


def rolled_by_hand(attentions: np.ndarray) -> np.ndarray:
    """Rollout after the last of ``attentions`` (L, nh, T, T): the paper's recursion with the residual, written here."""
    t = attentions.shape[-1]
    rolled = np.eye(t)
    for layer in attentions.astype(np.float64):
        rolled = (0.5 * layer.mean(axis=0) + 0.5 * np.eye(t)) @ rolled
    return rolled


def example(scores: np.ndarray) -> tuple[int, int]:
    layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return int(layer), int(head)


# ---- MiniLM ----


@pytest.fixture(scope="module")
def probe(model):
    return mr.run_probe(model, 24, seed=0)


def test_minilm_roles_link_shows_its_roles_example_head(model, probe):
    at = page(rm_roles="next", rm_text=SENTENCE)
    assert not warnings(at)
    assert at.segmented_control(key="w_rm_role_example").value == "next"
    assert address(at)["rm_roles"] == "next"
    expected = definitions(probe.attentions.astype(np.float64), probe.half)
    layer, head = example(expected["next"])
    shown = charts(at)
    np.testing.assert_allclose(decode(shown["rm_roles_pattern"]["data"][0]["z"]), probe.attentions[layer, head],
                               atol=1e-6)
    frame = next(d.value for d in at.dataframe if "example" in d.value.columns)
    assert list(frame["example"][:6]) == ["{}.{}".format(*example(expected[key])) for key in expected]
    np.testing.assert_allclose(frame["its score"][:6].to_numpy(), [v.max() for v in expected.values()], atol=1e-6)
    assert frame["heads"].sum() == 72
    assert any("Induction is left out" in m.value for m in at.markdown)
    assert any(f"**Layer {layer}, head {head}**" in m.value for m in at.markdown)


def test_minilm_bad_role_says_so_and_shows_the_default(probe):
    at = page(rm_roles="induction", rm_text=SENTENCE)
    assert any("`rm_roles=induction`" in w for w in warnings(at))
    assert at.segmented_control(key="w_rm_role_example").value == "previous"
    assert address(at)["rm_roles"] == "previous"
    layer, head = example(definitions(probe.attentions.astype(np.float64), probe.half)["previous"])
    np.testing.assert_allclose(decode(charts(at)["rm_roles_pattern"]["data"][0]["z"]), probe.attentions[layer, head],
                               atol=1e-6)


def test_minilm_flow_link_one_tokens_column(model):
    at = page(rm_flow="flow", rm_flow_layer="2", rm_flow_token="3", rm_flow_dir="to", rm_text=SENTENCE)
    assert not warnings(at)
    attentions = model.forward(SENTENCE).attentions  # (6, 12, T, T)
    flowed = af.flow(attentions[:3])  # (T, T): after layer 2
    frame = next(d.value for d in at.dataframe if "shown" in d.value.columns)
    np.testing.assert_allclose(frame["shown"].to_numpy(), flowed[:, 3], atol=1e-9)  # the column: where 3 goes
    np.testing.assert_allclose(frame["raw"].to_numpy(), attentions[2].astype(np.float64).mean(axis=0)[:, 3], atol=1e-6)
    assert not any(key.startswith("rm_flow_") for key in charts(at))  # one token: no matrices
    assert {name: address(at)[name] for name in ("rm_flow", "rm_flow_layer", "rm_flow_token", "rm_flow_dir")} == {
        "rm_flow": "flow", "rm_flow_layer": "2", "rm_flow_token": "3", "rm_flow_dir": "to"}


def test_minilm_flow_link_every_token_rollout(model):
    at = page(rm_flow="rollout", rm_flow_layer="3", rm_text=SENTENCE)
    attentions = model.forward(SENTENCE).attentions
    shown = charts(at)
    np.testing.assert_allclose(decode(shown["rm_flow_0"]["data"][0]["z"]), attentions[3].mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(decode(shown["rm_flow_1"]["data"][0]["z"]), rolled_by_hand(attentions[:4]), atol=1e-6)
    assert address(at)["rm_flow_token"] == "all"


def test_minilm_bad_flow_values_say_so_and_fall_back(model):
    at = page(rm_flow="max", rm_flow_layer="9", rm_flow_token="99", rm_flow_dir="up", rm_text=SENTENCE)
    said = " ".join(warnings(at))
    for name in ("rm_flow=max", "rm_flow_layer=9", "rm_flow_token=99", "rm_flow_dir=up"):
        assert name in said
    assert {name: address(at)[name] for name in ("rm_flow", "rm_flow_layer", "rm_flow_token", "rm_flow_dir")} == {
        "rm_flow": "rollout", "rm_flow_layer": "5", "rm_flow_token": "all", "rm_flow_dir": "from"}
    attentions = model.forward(SENTENCE).attentions
    np.testing.assert_allclose(decode(charts(at)["rm_flow_1"]["data"][0]["z"]), rolled_by_hand(attentions), atol=1e-6)


def test_without_the_parameters_both_sections_stay_closed(model):
    at = page(rm_text=SENTENCE)
    assert not any(key.startswith(("rm_flow_", "rm_roles_")) for key in charts(at))
    assert "rm_flow" not in address(at) and "rm_roles" not in address(at)


# ---- SmolLM2 ----


def test_smollm2_roles_link_shows_its_roles_example_head(smollm2):
    at = page(model="smollm2", rm_roles="duplicate")
    assert not warnings(at)
    probe = smollm2.induction(half=24, seed=0)
    attentions, half = probe.attentions.astype(np.float64), probe.half
    duplicate = np.mean([attentions[:, :, i, i - half] for i in range(half, 2 * half)], axis=0)  # (L, nh)
    layer, head = example(duplicate)
    shown = decode(charts(at)["sm_roles_pattern"]["data"][0]["z"])  # (2n, 2n), masked cells blank
    causal = np.tri(2 * half, dtype=bool)
    np.testing.assert_array_equal(np.isnan(shown), ~causal)
    np.testing.assert_allclose(shown[causal], probe.attentions[layer, head][causal], atol=1e-6)
    assert address(at)["rm_roles"] == "duplicate"


def test_smollm2_flow_link_one_tokens_row(smollm2):
    from ui.pages.real_model.smollm2 import DEFAULT_PROMPT

    at = page(model="smollm2", rm_flow="rollout", rm_flow_layer="4", rm_flow_token="2", rm_flow_dir="to")
    attentions = smollm2.forward(DEFAULT_PROMPT, traces=()).attentions
    frame = next(d.value for d in at.dataframe if "shown" in d.value.columns)
    np.testing.assert_allclose(frame["shown"].to_numpy(), rolled_by_hand(attentions[:5])[2, :3], atol=1e-6)  # its row
    assert list(frame["other"]) == ["0:The", "1:␣E", "2:iffel"]  # the keys it can see, no masked zeros
    assert "rm_flow_dir" not in address(at)  # a causal model has one direction: the link is told so
    assert any("`rm_flow_dir` is for the encoder" in w for w in warnings(at))
    assert address(at)["rm_flow_layer"] == "4"


def test_smollm2_flow_is_left_out_past_its_cap(smollm2):
    at = page(model="smollm2", rm_flow="flow",
              rm_text="one two three four five six seven eight nine ten eleven twelve thirteen fourteen")
    assert any("Flow is left out at" in i.value for i in at.info)
    assert not any(key.startswith("sm_flow_") for key in charts(at))


# ---- switching models with heads off in the link ----


def test_switching_models_keeps_each_models_heads_off_to_itself(model, smollm2):
    at = page(rm_off="5.11", rm_text=SENTENCE)
    assert at.multiselect(key="w_rm_off").value == [5 * 12 + 11]
    at.segmented_control(key="w_rm_model").set_value("smollm2").run()
    assert not at.exception
    assert not any("does not exist" in w for w in warnings(at)), warnings(at)
    assert at.multiselect(key="w_sm_off").value == []
    assert "rm_off" not in address(at)
    at.segmented_control(key="w_rm_model").set_value("minilm").run()
    assert not at.exception and not any("does not exist" in w for w in warnings(at))
    assert at.multiselect(key="w_rm_off").value == [5 * 12 + 11]
    assert address(at)["rm_off"] == "5.11"


@pytest.mark.parametrize("link", [{"rm_off": "6.0"}, {"model": "smollm2", "rm_off": "30.0"}])
def test_a_head_that_does_not_exist_still_warns(link, model, smollm2):
    at = page(**link)
    assert any("does not exist" in w for w in warnings(at)), warnings(at)


# ---- the token sets' layer × head grid names its x-axis (it was missing at 1280 px) ----


@pytest.mark.parametrize(("link", "key"), [({"rm_text": SENTENCE}, "rm_sets_grid"), ({"model": "smollm2"}, "sm_sets_grid")])
def test_the_token_sets_grid_names_its_axis(link, key, model, smollm2):
    at = page(**link, rm_sq="2", rm_sk="0,1")
    layout = charts(at)[key]["layout"]
    assert layout["xaxis"]["title"]["text"] == "head"
    assert layout["xaxis"]["automargin"] is True  # the title gets the room it needs below the tick labels


# ---- in Chinese and Spanish: the sections' words are the catalog's, their numbers the same ----


@pytest.mark.parametrize("lang", ["zh-CN", "es"])
def test_minilm_roles_and_flow_in_other_languages(lang, model):
    from mha_core.head_roles import ENCODER_NO_INDUCTION
    from ui.i18n import _ as translate
    from ui.i18n import using_language

    link = dict(rm_roles="next", rm_flow="flow", rm_flow_layer="2", rm_flow_token="3", rm_flow_dir="to",
                rm_text=SENTENCE)
    english, there = page(**link), page(**link, lang=lang)
    with using_language(lang):
        note, heading = translate(ENCODER_NO_INDUCTION), translate("Column of {token}: how much of it reaches each token")
    assert note != ENCODER_NO_INDUCTION
    assert any(note in m.value for m in there.markdown)
    assert any(heading.split("{token}")[-1].strip() in m.value for m in there.markdown)
    numbers = [next(d.value for d in at.dataframe if "shown" in d.value.columns)["shown"].to_numpy()
               for at in (english, there)]
    np.testing.assert_array_equal(numbers[0], numbers[1])


# ---- on a phone the wide tables say they scroll sideways (they have no scroll bar there) ----


def test_on_a_phone_the_roles_and_flow_tables_say_they_scroll(monkeypatch, model):
    monkeypatch.setattr("ui.pages.real_model.roles_view.on_phone", lambda: True)
    monkeypatch.setattr("ui.pages.real_model.flow_view.on_phone", lambda: True)
    at = page(rm_roles="cls", rm_flow="rollout", rm_flow_token="2", rm_text=SENTENCE)
    hints = [c.value for c in at.caption if "Swipe the table sideways" in c.value]
    assert any("5 columns: role, heads with this role" in h for h in hints), hints
    assert any("3 columns: input token, raw attention, rollout" in h for h in hints), hints
