"""Every panel of every step of Step by step shows the engine array it claims to show.

The table below says, for each step, which array of the ``RunResult`` / ``AttentionTrace`` each
panel (found by the start of its title) must equal. The expectations are read from the engine's
run, never from the step builders; and every panel a step draws must be in the table, so a new
panel cannot slip through unchecked.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import plotly.io as pio
import pytest

from mha_core.config import MHAConfig, run
from ui.pipeline.panels import panels_figure
from ui.pipeline.records import step_inputs
from ui.pipeline.steps import build_steps


def side_by_side(per_head: np.ndarray) -> np.ndarray:
    """(nh, T, hs) -> (T, nh*hs): the heads' blocks next to each other, head 0 first (written out here)."""
    return np.concatenate([per_head[h] for h in range(per_head.shape[0])], axis=1)


# step slug -> {start of a panel's title: the engine array it shows}, for head h of run r
EXPECTED = {
    "input": lambda r, h: {
        "E: token embeddings": r.embeddings,
        "E_q: query sentence": r.embeddings,
        "E_kv: key/value sentence": r.key_embeddings,
    },
    "positional": lambda r, h: {"P: positional encoding": r.positional, "X = E + P": r.x_q, "X_kv = E_kv + P": r.x_kv},
    "qkv": lambda r, h: {
        "W_Q": r.weights.w_q,
        "W_K": r.weights.w_k,
        "W_V": r.weights.w_v,
        "Q (queries)": side_by_side(r.trace.q if r.trace.q_unrotated is None else r.trace.q_unrotated),  # X W_Q
        "K (keys)": side_by_side(unrotated_k(r)),  # X W_K: RoPE turns them in a later step
        "V (values)": side_by_side(r.trace.v),
    },
    "split": lambda r, h: {  # before RoPE turns them; K_(g), V_(g): the shared key/value head g = h // (nh/kv)
        f"Q_{h}": r.trace.q[h] if r.trace.pe != "rope" else r.trace.q_unrotated[h],
        f"K_{h}" if kv_of(r, h) == h else f"K_({kv_of(r, h)})": unrotated_k(r)[kv_of(r, h)],
        f"V_{h}" if kv_of(r, h) == h else f"V_({kv_of(r, h)})": r.trace.v[kv_of(r, h)],
    },
    "kv_share": lambda r, h: {
        "Which K/V head": np.array([[r.trace.k[g] is not None and np.allclose(  # reads g: its scores are q_h . k_g
            r.trace.scores[q], r.trace.q[q] @ r.trace.k[g].T, rtol=0, atol=1e-12) for g in range(r.trace.kv_heads)]
            for q in range(r.trace.n_heads)]),
        f"K_({kv_of(r, h)})": unrotated_k(r)[kv_of(r, h)],  # before RoPE, as in the split step
    },
    "rope": lambda r, h: {
        "θ: angle": r.trace.q_angles,
        "θ_k: angle": r.trace.k_angles,
        f"Q_{h} before rotation": r.trace.q_unrotated[h],
        f"Q_{h} rotated": r.trace.q[h],
        f"K_({kv_of(r, h)}) before rotation": r.trace.k_unrotated[kv_of(r, h)],
        f"K_({kv_of(r, h)}) rotated": r.trace.k[kv_of(r, h)],
    },
    "scores": lambda r, h: {f"S_{h} = ": r.trace.scores[h]},
    "scale": lambda r, h: {f"S_{h} × scale": r.trace.scores[h] * r.trace.scale},
    "alibi": lambda r, h: {
        f"B_{h} = ": r.trace.bias[h],
        # the logits before the mask: the engine's where the mask allows (exactly), recomputed where it does not
        f"S_{h} × scale + B_{h}": np.where(np.isfinite(r.trace.logits[h]), r.trace.logits[h],
                                           r.trace.scores[h] * r.trace.scale + r.trace.bias[h]),
    },
    "mask": lambda r, h: {"M: mask": r.mask, f"L_{h}: logits": r.trace.logits[h]},
    "softmax": lambda r, h: {f"A_{h} = softmax": r.trace.weights[h]},
    "mix": lambda r, h: {f"head_{h} = A_{h} V_{h}": r.trace.heads[h]},
    "concat": lambda r, h: {"concat of all heads": r.trace.concat},
    "output": lambda r, h: {"W_O": r.weights.w_o, "Y: output": r.trace.output},
}

OPTIONAL = ("kv_share", "rope", "alibi")

CONFIGS = {
    "default": MHAConfig(),
    "cross, positions, bias": MHAConfig(kv_tokens=("a", "dog", "ran"), pe="sinusoidal", bias=True),
    "causal, no W_O": MHAConfig(d_model=12, n_heads=3, mask="causal", output_projection=False),
    "padding, fully masked, temperature": MHAConfig(
        kv_tokens=("x", "y"), mask="padding", valid_len=0, scale_rule="temperature", temperature=3.0
    ),
    "window, sqrt(T)": MHAConfig(mask="window", window=1, scale_rule="sqrt_t", seed=4),
    "hand-built previous-token head": MHAConfig(init="previous"),
    "rope": MHAConfig(pe="rope", mask="causal"),
    "rope, cross, gqa": MHAConfig(pe="rope", kv_tokens=("a", "dog", "ran"), n_heads=4, kv_heads=2, rope_base=500.0),
    "alibi, causal, gqa": MHAConfig(pe="alibi", mask="causal", d_model=24, n_heads=6, kv_heads=2),
    "alibi, 3 heads, window": MHAConfig(pe="alibi", mask="window", d_model=12, n_heads=3),
    "mqa, sinusoidal": MHAConfig(kv_heads=1, pe="sinusoidal", bias=True),
}


def optional_steps(result) -> set[str]:
    """The steps that appear only with some settings (read from the engine's trace)."""
    t = result.trace
    return ({"kv_share"} if t.k.shape[0] < t.q.shape[0] else set()) | ({t.pe} & {"rope", "alibi"})


def kv_of(r, h: int) -> int:
    """The key/value head query head h reads: h // (nh/kv), written out here."""
    return h // (r.trace.n_heads // r.trace.k.shape[0])


def unrotated_k(r):
    return r.trace.k_unrotated if r.trace.pe == "rope" else r.trace.k


def claimed_array(expected: dict, title: str) -> np.ndarray:
    matches = [name for name in expected if title.startswith(name)]
    assert len(matches) == 1, f"panel {title!r} matches {matches} in the table: add it, or make the titles distinct"
    return expected[matches[0]]


@pytest.mark.parametrize("config", list(CONFIGS.values()), ids=list(CONFIGS))
def test_every_panel_shows_the_engine_array_it_claims(config):
    result = run(config)
    for head in range(config.n_heads):
        steps = build_steps(step_inputs(result), head)
        assert [s.slug for s in steps] == [s for s in EXPECTED if s in optional_steps(result) or s not in OPTIONAL]
        for step in steps:
            expected = EXPECTED[step.slug](result, head)
            for panel in step.panels:
                array = claimed_array(expected, panel.title)
                assert array is not None, f"{step.slug}: {panel.title!r} is drawn but the run has no such array"
                np.testing.assert_array_equal(panel.matrix, np.asarray(array, dtype=panel.matrix.dtype),
                                              err_msg=f"{step.slug}: {panel.title}, head {head}")


@pytest.mark.parametrize("config", list(CONFIGS.values()), ids=list(CONFIGS))
def test_the_scale_panel_is_the_engines_logits_wherever_the_mask_allows(config):
    """The scaled scores (plus ALiBi's bias) are the logits before the mask: equal to trace.logits on every allowed cell."""
    result = run(config)
    trace = result.trace
    last_before_mask = ("alibi", 1) if trace.pe == "alibi" else ("scale", 0)
    for head in range(config.n_heads):
        steps = build_steps(step_inputs(result), head)
        scale = next(s for s in steps if s.slug == last_before_mask[0]).panels[last_before_mask[1]]
        allowed = np.isfinite(trace.logits[head])
        np.testing.assert_array_equal(scale.matrix[allowed], trace.logits[head][allowed])


def test_every_step_draws_the_panels_its_configuration_calls_for():
    """Switched-off steps draw nothing, so the table is not satisfied by empty steps."""
    drawn = {
        name: {s.slug: len(s.panels) for s in build_steps(step_inputs(run(config)), 0)}
        for name, config in CONFIGS.items()
    }
    assert drawn["default"] == {"input": 1, "positional": 0, "qkv": 6, "split": 3, "scores": 1, "scale": 1,
                                "mask": 0, "softmax": 1, "mix": 1, "concat": 1, "output": 2}
    assert drawn["cross, positions, bias"]["input"] == 2 and drawn["cross, positions, bias"]["positional"] == 3
    assert drawn["causal, no W_O"]["mask"] == 2 and drawn["causal, no W_O"]["output"] == 0
    assert drawn["rope"]["rope"] == 5 and drawn["rope, cross, gqa"]["rope"] == 6  # + the keys' angles
    assert drawn["rope, cross, gqa"]["kv_share"] == 2 and drawn["mqa, sinusoidal"]["kv_share"] == 2
    assert drawn["alibi, causal, gqa"]["alibi"] == 2 and "kv_share" not in drawn["rope"]


# ---- the Real model page: the same steps on one layer of the checkpoint ----------------------


def head_slice(array: np.ndarray, shown: np.ndarray, head: int) -> np.ndarray:
    """The part of ``array`` a panel too large to send shows: the head's columns, else the head's rows."""
    width = shown.shape[1] if shown.shape[0] == array.shape[0] else shown.shape[0]
    start, stop = head * width, (head + 1) * width
    return array[:, start:stop] if shown.shape[0] == array.shape[0] else array[start:stop]


def test_every_real_model_panel_shows_the_checkpoints_arrays(model):
    from types import SimpleNamespace

    from ui.pages import real_model as rm
    from ui.pages.real_model import layer_steps as rm_steps

    run_ = model.forward(rm.DEFAULT_SENTENCE)
    layer, head = 2, 7
    layer_run = run_.layers[layer]
    x = layer_run.input  # (T, C)
    engine = SimpleNamespace(  # the arrays as the forward pass produced them, named as in a RunResult
        embeddings=x, key_embeddings=x, positional=None, x_q=x, x_kv=x, mask=None,
        trace=layer_run.attention, weights=model.layers[layer].attention,
    )
    real_only = {
        "input": {"X": x},
        "add_norm": {"LayerNorm(X + Y)": layer_run.after_attention, "layer output": layer_run.output},
    }
    steps = rm_steps.real_steps(run_, rm_steps.layer_inputs(run_, layer, engine.weights), layer, head)
    for step in steps:
        expected = real_only.get(step.slug) or EXPECTED[step.slug](engine, head)
        for panel in step.panels:
            array = np.asarray(claimed_array(expected, panel.title))
            if panel.matrix.shape != array.shape:  # slimmed for the payload: the head's block only
                array = head_slice(array, panel.matrix, head)
            np.testing.assert_array_equal(panel.matrix, array, err_msg=f"{step.slug}: {panel.title}")


def decoded(z) -> np.ndarray:
    """A plotly typed array ({dtype, bdata, shape}) back to numpy."""
    shape = tuple(int(n) for n in str(z["shape"]).split(","))
    return np.frombuffer(base64.b64decode(z["bdata"]), z["dtype"]).reshape(shape)


@pytest.mark.parametrize("config", list(CONFIGS.values()), ids=list(CONFIGS))
def test_a_row_of_panels_drawn_as_one_chart_shows_each_engine_array_under_its_title(config):
    result = run(config)
    merged = 0
    for step in build_steps(step_inputs(result), 0):
        expected = EXPECTED[step.slug](result, 0)
        for start in range(0, len(step.panels), 3):  # the page's rows: three across
            row = step.panels[start : start + 3]
            if len(row) < 2 or len({panel.matrix.shape[0] for panel in row}) > 1:
                continue
            merged += 1
            spec = json.loads(pio.to_json(panels_figure(tuple(row), font_size=12, width_px=150), validate=False))
            layout = spec["layout"]
            assert len(spec["data"]) == len(row) == len(layout["annotations"])
            for index, (trace, title) in enumerate(zip(spec["data"], layout["annotations"], strict=True)):
                suffix = "" if index == 0 else str(index + 1)
                domain = layout[f"xaxis{suffix}"]["domain"]
                assert trace["xaxis"] == f"x{suffix}" and domain[0] < title["x"] < domain[1]
                claimed = np.asarray(claimed_array(expected, title["text"]), dtype=np.float32)
                shown = decoded(trace["z"]).astype(np.float32)
                np.testing.assert_array_equal(np.nan_to_num(shown, nan=-np.inf), claimed,
                                              err_msg=f"{step.slug}: {title['text']}")
                assert trace["colorbar"]["x"] > domain[1]  # its own colour bar, right of its own cells
    assert merged >= 1  # W_Q, W_K, W_V at least (Q, K, V too when keys and queries are as many)
