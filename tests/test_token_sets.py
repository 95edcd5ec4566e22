"""Token sets (mha_core.token_sets) and their section of the Real model page, both models.

The shown grid and per-token table against the engine's attention arrays (the run's weights), summed here with
plain loops; the link opens the section with its sets; bad positions get a message and are left out.
"""

from __future__ import annotations

import base64

import numpy as np
import pytest

from mha_core import token_sets as ts
from tests.address_bar import address
from tests.app_opener import open_app
from tests.shown_charts import charts
from ui.i18n import _ as translate
from ui.i18n import using_language

PAGE = "app_pages/real_model.py"


def summed(attentions: np.ndarray, queries, keys) -> np.ndarray:
    """The grid by loops over layers, heads, queries and keys: (L, nh)."""
    n_layers, n_heads = attentions.shape[:2]
    grid = np.zeros((n_layers, n_heads))
    for layer in range(n_layers):
        for head in range(n_heads):
            grid[layer, head] = sum(float(attentions[layer, head, i, j]) for i in queries for j in keys) / len(queries)
    return grid


def test_hand_fixture_and_errors():
    a = np.zeros((1, 1, 3, 3))
    a[0, 0] = [[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]]
    assert ts.set_grid(a, [1, 2], [0])[0, 0] == pytest.approx((0.5 + 0.2) / 2)
    received, given = ts.per_token(a, [1, 2], [0])
    np.testing.assert_allclose(received, [0.35, 0.4, 0.25])
    np.testing.assert_allclose(given, [1, 0.5, 0.2])
    with pytest.raises(ValueError, match="0..2"):
        ts.set_grid(a, [3], [0])
    with pytest.raises(ValueError, match="at least one"):
        ts.set_grid(a, [], [0])


TITLE = "Share of the query tokens' attention on the key tokens"


def grid_of(at, title: str = TITLE) -> np.ndarray:
    """The grid's numbers; its title is written above it, in the page's language (it wraps on a phone)."""
    assert any(title in m.value for m in at.markdown)
    figure = next(f for key, f in charts(at).items() if key.endswith("_sets_grid"))
    z = figure["data"][0]["z"]
    if isinstance(z, dict):
        return np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape([int(n) for n in str(z["shape"]).split(",")]).astype(np.float64)
    return np.asarray(z, dtype=np.float64)


def check_page(at, attentions, queries, keys, title: str = TITLE):
    attentions = np.asarray(attentions, dtype=np.float64)
    np.testing.assert_allclose(grid_of(at, title), summed(attentions, queries, keys), atol=1e-6)
    frame = next(d.value for d in at.dataframe if "received" in d.value.columns)
    received = [sum(float(attentions[:, :, i, j].mean()) for i in queries) / len(queries)
                for j in range(attentions.shape[-1])]
    given = [sum(float(attentions[:, :, i, j].mean()) for j in keys) for i in range(attentions.shape[-1])]
    np.testing.assert_allclose(frame["received"].to_numpy(), received, atol=1e-9)
    np.testing.assert_allclose(frame["given"].to_numpy(), given, atol=1e-9)


def test_minilm_link_opens_the_sets_and_shows_the_engines_sums(model):
    from ui.pages.real_model import DEFAULT_SENTENCE

    run = model.forward(DEFAULT_SENTENCE)
    at = open_app(PAGE, timeout=180, rm_sq="3,5", rm_sk="0,99,x")
    assert at.multiselect(key="w_rm_set_q").value == [3, 5]
    assert at.multiselect(key="w_rm_set_k").value == [0]
    warnings = " ".join(w.value for w in at.warning)
    assert "'99' is not a token position" in warnings and "'x' is not a token position" in warnings
    assert address(at)["rm_sq"] == "3,5" and address(at)["rm_sk"] == "0"
    check_page(at, run.attentions, [3, 5], [0])


def test_smollm2_sets_and_another_language(smollm2):
    from ui.pages.real_model.smollm2 import DEFAULT_PROMPT

    attentions = smollm2.forward(DEFAULT_PROMPT, traces=()).attentions
    link = {"model": "smollm2", "rm_sq": "11", "rm_sk": "0,1,2"}
    at = open_app(PAGE, timeout=300, **link)
    check_page(at, attentions, [11], [0, 1, 2])
    other = open_app(PAGE, timeout=300, **link, lang="es")
    with using_language("es"):
        title = translate(TITLE)
    assert title != TITLE
    check_page(other, attentions, [11], [0, 1, 2], title)
