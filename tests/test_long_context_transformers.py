"""Longer than trained (mha_core.smollm2_long) against transformers' own RoPE scaling on the same SmolLM2 weights.

transformers' Llama reads the same GGUF file (its own loader, eager attention, float32); its config gets
``rope_parameters`` of type linear, dynamic or yarn and its rotary embedding is built again from that config, so its
frequencies, the dynamic update and YaRN's ramp and attention factor are transformers' code, not ours. Both sides get
the same position ids (the first copy at 0..n-1, the rest moved past the trained length). Inputs stay short (64
tokens) so that CI stays fast.

At positions near 16,384 an ulp of theta or of the angle is ~1e-3 rad in float32, which moves the logits by ~5e-3: so
the logits are compared with their rotary module's angles taken in float64 (its ``forward`` again, with
``.double()``; its theta, its dynamic update and its attention factor as they are) and with their float32 theta in
our forward too. Their theta and attention factor themselves are compared with ours apart (rtol 1e-6, float32's).
"""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import smollm2_long as lg

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("gguf", reason="transformers reads GGUF files with the gguf package (pip install gguf)")
pytest.importorskip("accelerate", reason="transformers loads GGUF files only with accelerate installed")

ATOL_LOGITS = 2e-4  # the plain forward of TEXT (64 tokens, no scaling) already differs from theirs by 1.2e-4 at
# position 0 (float32 on both sides, measured); 1e-4, the figure, holds there for ~90% of the positions.
# Plus 2e-5 of a logit's size: on another CPU of this machine kind (OpenBLAS's Haswell kernels on an AVX-512 EPYC) 2 of
# 3.1 million logits of ~20 differed by 2.2e-4 under linear scaling past the trained length (1.6e-5 relative).
RTOL_LOGITS = 2e-5
ATOL_LOSS = 1e-4
TEXT = "A small red boat drifts past the old stone bridge."  # not the page's text
N_TOKENS = 64


def ours_positions(smollm2, tokens, method: str) -> np.ndarray:
    return lg.long_positions(lg.LongSetting(method, 2.0, 0.5, N_TOKENS), smollm2.config.context, tokens[1])


@pytest.fixture(scope="module")
def tokens(smollm2):
    return lg.long_token_ids(smollm2, TEXT, N_TOKENS)


def float64_angles(rotary_class):
    """Their rotary embedding with the angles position * theta taken in float64 (their theta, update and factor)."""
    from transformers.modeling_rope_utils import dynamic_rope_update

    class Float64Angles(rotary_class):
        @torch.no_grad()
        @dynamic_rope_update
        def forward(self, x, position_ids):
            freqs = position_ids[..., None].double() * self.inv_freq.double()  # (1, T, hs/2)
            emb = torch.cat((freqs, freqs), dim=-1)  # (1, T, hs)
            return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)

    return Float64Angles


def their_logits(llama, ids: np.ndarray, positions: np.ndarray, rope: dict | None) -> np.ndarray:
    """transformers' logits (T, V) with ``rope`` as its config's rope_parameters (None: as loaded), float32."""
    model = llama.model
    kept_parameters, kept_rotary = dict(model.config.rope_parameters), model.rotary_emb
    try:
        model.config.rope_parameters = {**kept_parameters, **(rope or {})}
        model.rotary_emb = float64_angles(type(kept_rotary))(config=model.config)
        with torch.no_grad():
            return llama(torch.tensor(ids)[None], position_ids=torch.tensor(positions)[None]).logits[0].numpy()
    finally:
        model.config.rope_parameters, model.rotary_emb = kept_parameters, kept_rotary


def ours(smollm2, tokens, method: str, factor: float = 2.0) -> lg.LongRun:
    ids, period = tokens
    return lg.long_forward(smollm2, ids, period, lg.LongSetting(method, factor, 0.5, N_TOKENS))


def their_theta(llama, rope: dict | None, seq_len: int) -> np.ndarray:
    """transformers' theta (hs/2,) for ``rope`` at ``seq_len`` (its rope_init function; the default one for None)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config, kept = llama.config, dict(llama.config.rope_parameters)
    try:
        config.rope_parameters = {**kept, **(rope or {})}
        init = ROPE_INIT_FUNCTIONS[rope["rope_type"]] if rope else type(llama.model.rotary_emb).compute_default_rope_parameters
        return init(config, seq_len=seq_len)[0].double().numpy()
    finally:
        config.rope_parameters = kept


def with_their_theta(monkeypatch, theta: np.ndarray) -> None:
    """Our forward with transformers' float32 theta (cast to float64), our own q, k multiplier (compared apart)."""
    exact = lg.inverse_frequencies
    monkeypatch.setattr(lg, "inverse_frequencies", lambda *args: (theta, exact(*args)[1]))


THEIR_ROPE = {
    "trained": None,
    "inside": None,
    "linear": {"rope_type": "linear", "factor": 2.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0},
    "yarn": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8192},
}


@pytest.mark.parametrize("method", list(THEIR_ROPE))
def test_scaled_rope_logits_equal_transformers(smollm2, llama, tokens, method, monkeypatch):
    positions = ours_positions(smollm2, tokens, method)
    with_their_theta(monkeypatch, their_theta(llama, THEIR_ROPE[method], int(positions.max()) + 1))
    run = ours(smollm2, tokens, method)
    assert llama.config.max_position_embeddings == smollm2.config.context == 8192
    if method != "inside":
        assert run.positions.max() == 2 * 8192 - 1  # past the trained length: what the test is about
    theirs = their_logits(llama, tokens[0], run.positions, THEIR_ROPE[method])  # (T, V)
    mine = smollm2.unembed(run.final)  # (T, V)
    np.testing.assert_allclose(mine, theirs, atol=ATOL_LOGITS, rtol=RTOL_LOGITS)


def test_loss_per_position_equals_transformers_log_softmax(smollm2, llama, tokens, monkeypatch):
    with_their_theta(monkeypatch, their_theta(llama, THEIR_ROPE["yarn"], 2 * 8192))
    run = ours(smollm2, tokens, "yarn")
    theirs = their_logits(llama, tokens[0], run.positions, THEIR_ROPE["yarn"])  # (T, V)
    log_p = torch.log_softmax(torch.tensor(theirs, dtype=torch.float64), dim=-1).numpy()  # (T, V)
    expected = -log_p[np.arange(N_TOKENS - 1), tokens[0][1:]]  # (T-1,)
    np.testing.assert_allclose(run.losses, expected, atol=ATOL_LOSS, rtol=0)


@pytest.mark.parametrize("method", ["linear", "dynamic", "yarn"])
def test_theta_and_attention_factor_equal_transformers(llama, method):
    """Their rope_init function (the dynamic one at the sequence length our run reaches) against ours."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = llama.config
    kept = dict(config.rope_parameters)
    try:
        config.rope_parameters = {**kept, **THEIR_ROPE[method]}
        theirs, their_factor = ROPE_INIT_FUNCTIONS[method](config, None, seq_len=2 * 8192)
    finally:
        config.rope_parameters = kept
    mine, my_factor = lg.inverse_frequencies(method, 2.0, 64, config.rope_parameters["rope_theta"], 8192, 2 * 8192)
    np.testing.assert_allclose(mine, theirs.double().numpy(), rtol=1e-6, atol=0)
    assert my_factor == pytest.approx(their_factor, abs=1e-12)


def test_the_scalings_change_the_logits(smollm2, tokens):
    """Guard: past the trained length each scaling gives logits of its own (a test above cannot pass vacuously)."""
    logits = {method: smollm2.unembed(ours(smollm2, tokens, method).final[-4:]) for method in THEIR_ROPE}
    for a in THEIR_ROPE:
        for b in THEIR_ROPE:
            if a < b:
                assert np.abs(logits[a] - logits[b]).max() > 1e-2, (a, b)
