"""The Compare A/B page in AppTest: panels against the engine's weights for A and B, links round-trip."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import shown_charts
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from tests.address_bar import address
from tests.sidebar_controls import control, set_control
from tests.test_app_heads import charts, decode, messages

ROOT = Path(__file__).resolve().parents[1]


def compare_page(params: dict[str, str]) -> AppTest:
    """The Compare page opened by a link with ``params``."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in params.items():
        at.query_params[name] = value
    at.switch_page("app_pages/compare.py")
    return at.run()


def assert_page_ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def panels(at: AppTest, key: str) -> list[np.ndarray]:
    return [decode(t["z"]) for t in charts(at)[key]["data"] if "coloraxis" in t]


def test_a_b_and_difference_are_the_engine_weights():
    at = compare_page({"mask": "causal", "b_scale": "none", "b_mask": "none"})
    assert_page_ok(at)
    ra = run(MHAConfig(mask="causal"))
    rb = run(MHAConfig(scale_rule="none"))
    at.selectbox(key="cmp_head").set_value(2).run()
    a, b = panels(at, "cmp_pair")
    np.testing.assert_allclose(a, np.where(ra.mask, ra.trace.weights[2], np.nan), atol=1e-6)  # masked: grey layer
    np.testing.assert_allclose(b, rb.trace.weights[2], atol=1e-6)
    delta = panels(at, "cmp_delta")
    assert len(delta) == 4
    for h, z in enumerate(delta):
        np.testing.assert_allclose(z, rb.trace.weights[h] - ra.trace.weights[h], atol=1e-6)
    d = np.abs(rb.trace.weights[0] - ra.trace.weights[0])
    i, j = np.unravel_index(np.argmax(d), d.shape)
    summary = next(m.value for m in at.markdown if m.value.startswith("- head 0"))
    assert f"largest change {d.max():.3f} at query {ra.query_labels[i]} → key {ra.key_labels[j]}" in summary
    assert "**Scale** sqrt_dk → none" in "\n".join(m.value for m in at.markdown)


def test_the_charts_alt_text_states_the_engine_numbers():
    """Each chart's words (its alt) name the numbers the engine computed: B's strongest weight of the chosen head,
    the largest rise and fall of B − A, with the cells' labels."""
    at = compare_page({"mask": "causal", "b_scale": "none", "b_mask": "none"})
    at.selectbox(key="cmp_head").set_value(1).run()
    assert_page_ok(at)
    ra, rb = run(MHAConfig(mask="causal")), run(MHAConfig(scale_rule="none"))
    alts = {shown_charts.key_of(e): shown_charts.settings_of(e)["alt"] for e in shown_charts.chart_elements(at)}
    b = rb.trace.weights[1]
    i, j = np.unravel_index(b.argmax(), b.shape)
    assert "B: head 1: " in alts["cmp_pair"]
    assert f"strongest {b.max():.2f} from “{rb.query_labels[i]}” to “{rb.key_labels[j]}”" in alts["cmp_pair"]
    t = b.shape[0]
    assert f"{t * (t - 1) // 2} of {t * t} cells masked" in alts["cmp_pair"]  # A's causal mask, said in words
    for h in range(4):
        d = rb.trace.weights[h] - ra.trace.weights[h]
        up, down = np.unravel_index(d.argmax(), d.shape), np.unravel_index(d.argmin(), d.shape)
        assert (f"B − A, head {h}: largest positive {d.max():.2f} from “{ra.query_labels[up[0]]}” to "
                f"“{ra.key_labels[up[1]]}”; most negative {d.min():.2f} from “{ra.query_labels[down[0]]}” to "
                f"“{ra.key_labels[down[1]]}”") in alts["cmp_delta"]


def test_link_keeps_b_after_a_sidebar_change_and_b_controls_write_b_params():
    at = compare_page({"b_scale": "none"})
    assert at.session_state["cmp_scale"] == "none"
    set_control(at, "w_mask", "causal")
    assert_page_ok(at)
    assert address(at)["mask"] == "causal" and address(at)["b_scale"] == "none"
    assert "b_mask" not in address(at)  # B is A plus its own changes: it follows A's new mask
    assert at.session_state["cmp_mask"] == "causal"
    at.selectbox(key="cmp_init").set_value("first").run()
    assert_page_ok(at)
    assert address(at)["b_init"] == "first"
    expected = run(MHAConfig(mask="causal", scale_rule="none", init="first")).trace.weights[0]
    causal = np.tril(np.ones_like(expected, dtype=bool))
    np.testing.assert_allclose(panels(at, "cmp_pair")[1], np.where(causal, expected, np.nan), atol=1e-6)


def test_different_tokens_are_refused_and_bad_b_values_fall_back():
    at = compare_page({"b_tokens": "a b c"})
    assert_page_ok(at)
    assert "different tokens" in messages(at)
    assert "cmp_delta" not in charts(at)
    at = compare_page({"b_scale": "cubic", "b_heads": "x"})
    assert_page_ok(at)
    assert "B: `scale=cubic`" in messages(at)
    assert "cmp_delta" in charts(at)


def test_other_head_count_compares_the_smaller_number():
    at = compare_page({"b_heads": "2"})
    assert_page_ok(at)
    assert len(panels(at, "cmp_delta")) == 2
    ra, rb = run(MHAConfig()), run(replace(MHAConfig(), n_heads=2))
    np.testing.assert_allclose(panels(at, "cmp_delta")[1], rb.trace.weights[1] - ra.trace.weights[1], atol=1e-6)


def test_the_downloads_are_the_engine_weights_and_keep_no_arrays(downloads):
    import io

    import pandas as pd

    from tests.test_memory import HEAVY, held_objects

    assert_page_ok(compare_page({"mask": "causal", "b_scale": "none", "b_mask": "none"}))
    for key, data in downloads.items():
        assert callable(data), key
        assert not [v for v in held_objects(data) if isinstance(v, HEAVY)], key
    table = pd.read_csv(io.BytesIO(downloads["dl_compare"]()))
    wa, wb = run(MHAConfig(mask="causal")).trace.weights, run(MHAConfig(scale_rule="none")).trace.weights
    for which, expected in (("A", wa), ("B", wb), ("B-A", wb - wa)):
        for h in range(expected.shape[0]):
            block = table[table.iloc[:, 0] == f"{which} head {h}"].iloc[:, 2:].to_numpy(dtype=float)
            np.testing.assert_allclose(block, expected[h], atol=1e-12, err_msg=f"{which} head {h}")
    changes = pd.read_csv(io.BytesIO(downloads["dl_compare_heads"]()))
    assert len(changes) == wa.shape[0]


def test_b_with_one_hot_embeddings_too_narrow_for_them_falls_back_with_a_message():
    # Before, the one-hot rule lived outside MHAConfig.validate: this link ended in "cannot be computed".
    at = compare_page({"d_model": "4", "heads": "1", "b_emb": "onehot"})
    assert not at.exception and not at.error
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("B: one-hot embeddings need d_model >= 5") and "embedding=random" in w for w in warnings)
    assert {"cmp_pair", "cmp_delta"} <= set(charts(at))  # A, B and B − A are drawn


def divisors_up_to(n: int, limit: int) -> list[int]:
    """The head counts a width allows, by a loop written here (not the app's valid_head_counts)."""
    return [h for h in range(1, limit + 1) if n % h == 0]


def test_b_heads_offers_only_the_divisors_of_b_d_model_as_a_heads_does():
    at = compare_page({"b_d_model": "12"})
    assert_page_ok(at)
    b_heads, a_heads = at.selectbox(key="cmp_heads"), control(at, "w_heads")
    assert [int(o) for o in b_heads.options] == divisors_up_to(12, 16) == [1, 2, 3, 4, 6, 12]
    assert [int(o) for o in a_heads.options] == divisors_up_to(16, 16)
    b_heads.set_value(3).run()
    assert_page_ok(at)
    assert address(at)["b_heads"] == "3" and address(at)["b_d_model"] == "12"
    assert len(panels(at, "cmp_delta")) == 3  # B has 3 heads: heads 0..2 of A and B compared
    at.number_input(key="cmp_d_model").set_value(10).run()  # 3 heads do not divide 10: B falls to 2
    assert_page_ok(at)
    assert [int(o) for o in at.selectbox(key="cmp_heads").options] == divisors_up_to(10, 16)
    assert at.session_state["cmp_heads"] == 2 and address(at)["b_d_model"] == "10"


def test_b_cross_attention_toggle_writes_and_clears_the_second_sentence():
    at = compare_page({})
    assert_page_ok(at)
    at.toggle(key="cmp_cross").set_value(True).run()
    assert_page_ok(at)
    assert address(at)["b_kv_tokens"] == "a dog ran"  # the second sentence a switched-on toggle offers
    assert "different tokens" in messages(at)
    at.toggle(key="cmp_cross").set_value(False).run()
    assert_page_ok(at)
    assert "b_kv_tokens" not in address(at)
