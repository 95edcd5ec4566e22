"""Head ablation (mha_core.smollm2_ablation) against transformers' Llama with forward pre-hooks.

transformers runs SmolLM2 from the same GGUF file (its own loader and dequantizer, eager attention,
float32); a forward pre-hook on a layer's ``o_proj`` rewrites the columns h*hs..(h+1)*hs-1 of its input,
which is the concatenation of the head outputs: zero for zero ablation, the head's mean over the
reference text for mean ablation, where that mean is taken by another hook on transformers' own clean run.
Nothing of our ablation code runs on their side. The model loads once for this module (~30-90 s).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from mha_core import smollm2_ablation as ab

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("gguf", reason="transformers reads GGUF files with the gguf package (pip install gguf)")
pytest.importorskip("accelerate", reason="transformers loads GGUF files only with accelerate installed")

ATOL_LOGITS = 1e-4  # the tolerance for the ablated logits (float32 on both sides)
ATOL_LOSS = 1e-4
PROMPT = "When Mary and John went to the store, John gave a drink to"  # not used while writing the code
HEAD_SETS = (
    ((5, 4),),  # one head
    ((3, 2), (3, 7), (11, 4), (20, 0)),  # several heads, two in one layer
    ((29, 8),),  # the last head of the last layer: only one layer runs again
)


def hooked_logits(llama, ids: np.ndarray, heads, head_size: int, means=None) -> np.ndarray:
    """transformers' logits (T, V) with each (layer, head) of ``heads`` replaced in o_proj's input."""

    def replacing(columns):
        def pre_hook(module, args):
            x = args[0].clone()  # (1, T, nh*hs): the heads' outputs side by side
            for layer, head in columns:
                block = slice(head * head_size, (head + 1) * head_size)
                x[..., block] = 0.0 if means is None else torch.from_numpy(means[layer][head])
            return (x,)

        return pre_hook

    hooks = [llama.model.layers[layer].self_attn.o_proj.register_forward_pre_hook(
        replacing([(lay, h) for lay, h in heads if lay == layer])) for layer in sorted({lay for lay, _h in heads})]
    try:
        with torch.no_grad():
            return llama(torch.tensor(ids)[None]).logits[0].numpy()
    finally:
        for hook in hooks:
            hook.remove()


def their_head_means(llama, ids: np.ndarray, n_heads: int, head_size: int) -> list[np.ndarray]:
    """Each layer's o_proj input averaged over the positions of ``ids``, as (nh, hs) per layer, from hooks."""
    seen = {}

    def recording(layer):
        def pre_hook(module, args):
            seen[layer] = args[0][0].mean(dim=0).reshape(n_heads, head_size).numpy().copy()

        return pre_hook

    hooks = [block.self_attn.o_proj.register_forward_pre_hook(recording(n)) for n, block in enumerate(llama.model.layers)]
    try:
        with torch.no_grad():
            llama(torch.tensor(ids)[None])
    finally:
        for hook in hooks:
            hook.remove()
    return [seen[n] for n in range(len(llama.model.layers))]


def their_losses(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Cross-entropy of each next token from transformers' logits, with torch's own function."""
    return torch.nn.functional.cross_entropy(torch.from_numpy(logits[:-1]).double(), torch.from_numpy(np.array(ids[1:])),  # a copy: the run's ids are read-only
                                             reduction="none").numpy()


@pytest.fixture(scope="module")
def run(smollm2):
    return smollm2.forward(PROMPT, traces=())


@pytest.mark.parametrize("heads", HEAD_SETS)
def test_zero_ablation_equals_hooked_transformers(smollm2, llama, run, heads):
    hs = smollm2.config.head_size
    theirs = hooked_logits(llama, run.token_ids, heads, hs)  # (T, V)
    ours = ab.ablate(smollm2, run, heads, "zero")
    assert ours.first_layer == min(layer for layer, _h in heads)
    np.testing.assert_allclose(ours.next_logits, theirs[-1], atol=ATOL_LOGITS, rtol=0)
    np.testing.assert_allclose(ours.losses, their_losses(theirs, run.token_ids), atol=ATOL_LOSS, rtol=0)
    clean = hooked_logits(llama, run.token_ids, (), hs)
    assert np.abs(theirs[-1] - clean[-1]).max() > 100 * ATOL_LOGITS  # the ablation changed something to check


def test_mean_ablation_equals_hooked_transformers(smollm2, llama, run):
    config = smollm2.config
    reference_ids = smollm2.encode(ab.REFERENCE_TEXT)
    means = their_head_means(llama, reference_ids, config.n_heads, config.head_size)
    ours_means = ab.head_means(smollm2)
    np.testing.assert_allclose(ours_means, np.stack(means), atol=1e-5, rtol=0)
    heads = HEAD_SETS[1]
    theirs = hooked_logits(llama, run.token_ids, heads, config.head_size, means)
    ours = ab.ablate(smollm2, run, heads, "mean", means=ours_means)
    np.testing.assert_allclose(ours.next_logits, theirs[-1], atol=ATOL_LOGITS, rtol=0)
    np.testing.assert_allclose(ours.losses, their_losses(theirs, run.token_ids), atol=ATOL_LOSS, rtol=0)
    zero = ab.ablate(smollm2, run, heads, "zero")
    assert np.abs(zero.next_logits - ours.next_logits).max() > 100 * ATOL_LOGITS  # mean is not zero


def test_kl_and_loss_from_transformers_distributions(smollm2, llama, run):
    heads = HEAD_SETS[1]
    hs = smollm2.config.head_size
    clean, ablated = (hooked_logits(llama, run.token_ids, h, hs)[-1] for h in ((), heads))
    p = torch.log_softmax(torch.from_numpy(clean).double(), -1)
    q = torch.log_softmax(torch.from_numpy(ablated).double(), -1)
    expected = torch.nn.functional.kl_div(q, p, log_target=True, reduction="sum").item()  # KL(p || q)
    ours = ab.ablate(smollm2, run, heads, "zero")
    assert ours.kl == pytest.approx(expected, abs=1e-4)
    assert ours.kl > 1e-3


# ---- MiniLM: BertModel with a pre-hook on each layer's attention.output.dense (its W_O) ----

MINILM_SENTENCE = "The heads of a small encoder each read the sentence in their own way."
MINILM_HEADS = ((0, 3), (2, 7), (2, 11), (5, 0))


@pytest.fixture(scope="module")
def bert(model):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder = str(model.source.directory)
    return transformers.AutoTokenizer.from_pretrained(folder), transformers.BertModel.from_pretrained(
        folder, attn_implementation="eager").eval()


def hooked_bert(bert, text: str, heads, head_size: int, means=None) -> np.ndarray:
    """BertModel's last hidden state (T, C) with each (layer, head) replaced in the input of W_O."""
    tokenizer, encoder = bert

    def replacing(columns):
        def pre_hook(module, args):
            x = args[0].clone()  # (1, T, nh*hs)
            for layer, head in columns:
                x[..., head * head_size:(head + 1) * head_size] = (
                    0.0 if means is None else torch.from_numpy(means[layer][head]))
            return (x,)

        return pre_hook

    hooks = [encoder.encoder.layer[layer].attention.output.dense.register_forward_pre_hook(
        replacing([(lay, h) for lay, h in heads if lay == layer])) for layer in sorted({lay for lay, _h in heads})]
    try:
        with torch.no_grad():
            return encoder(**tokenizer(text, return_tensors="pt")).last_hidden_state[0].numpy()
    finally:
        for hook in hooks:
            hook.remove()


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_minilm_ablation_equals_hooked_bert(model, bert, mode):
    from mha_core import minilm_ablation as mab

    hs = model.config.head_size
    run = model.forward(MINILM_SENTENCE)
    means = None
    if mode == "mean":
        tokenizer, encoder = bert
        seen = {}
        hooks = [block.attention.output.dense.register_forward_pre_hook(
            lambda module, args, n=n: seen.__setitem__(n, args[0][0].mean(dim=0).reshape(-1, hs).numpy().copy()))
            for n, block in enumerate(encoder.encoder.layer)]
        with torch.no_grad():
            encoder(**tokenizer(ab.REFERENCE_TEXT, return_tensors="pt"))
        for hook in hooks:
            hook.remove()
        means = np.stack([seen[n] for n in range(len(seen))])
        np.testing.assert_allclose(mab.head_means(model), means, atol=1e-5, rtol=0)
    theirs = hooked_bert(bert, MINILM_SENTENCE, MINILM_HEADS, hs, means)  # (T, C)
    ours = mab.ablate(model, run, MINILM_HEADS, mode, means=means)
    assert ours.first_layer == 0
    np.testing.assert_allclose(ours.output, theirs, atol=1e-4, rtol=0)
    clean = hooked_bert(bert, MINILM_SENTENCE, (), hs)
    assert np.abs(theirs - clean).max() > 1e-2  # the ablation changed something to check
    sentence = theirs.mean(axis=0) / np.linalg.norm(theirs.mean(axis=0))
    assert ours.sentence_cosine == pytest.approx(float(sentence @ run.sentence_embedding()), abs=1e-5)


# ---- head roles: the scores from transformers' own attentions on the same probe ----


def test_role_scores_equal_their_definitions_on_transformers_attentions(smollm2, llama):
    from mha_core import head_roles as hr

    probe = smollm2.induction(half=24, seed=0)
    half, t = probe.half, 2 * probe.half
    with torch.no_grad():
        out = llama(torch.tensor(probe.token_ids)[None], output_attentions=True)
    theirs = torch.stack(out.attentions)[:, 0].double().numpy()  # (L, nh, 2n, 2n)
    definitions = {  # written from the page's definitions, not from mha_core.head_roles
        "previous": np.mean([theirs[:, :, i, i - 1] for i in range(1, t)], axis=0),
        "induction": np.mean([theirs[:, :, i, i - half + 1] for i in range(half, t)], axis=0),
        "duplicate": np.mean([theirs[:, :, i, i - half] for i in range(half, t)], axis=0),
        "first": np.mean([theirs[:, :, i, 0] for i in range(1, t)], axis=0),
        "local": np.mean([theirs[:, :, i, i - 3:i + 1].sum(axis=-1) for i in range(3, t)], axis=0),
    }
    ours = hr.role_scores(probe.attentions, half)
    for role, expected in definitions.items():
        np.testing.assert_allclose(ours[role], expected, atol=1e-5, rtol=0, err_msg=role)
    np.testing.assert_allclose(probe.induction, definitions["induction"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(probe.previous, definitions["previous"], atol=1e-5, rtol=0)
    assert definitions["induction"].max() > hr.THRESHOLD  # SmolLM2 has induction heads to find


# ---- targeted ablation: single heads' logit differences from the hooked forward ----

TARGETED_HEADS = ((0, 3), (5, 4), (17, 2), (29, 8))


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_targeted_logit_differences_equal_hooked_transformers(smollm2, llama, run, mode):
    from mha_core import targeted_ablation as ta

    config = smollm2.config
    clean = hooked_logits(llama, run.token_ids, (), config.head_size)[-1]  # (V,)
    top, alternative = (int(i) for i in np.argsort(-clean)[[0, 2]])
    means = np.stack(their_head_means(llama, smollm2.encode(ab.REFERENCE_TEXT), config.n_heads, config.head_size)
                     ) if mode == "mean" else None
    theirs = [hooked_logits(llama, run.token_ids, [head], config.head_size, means)[-1] for head in TARGETED_HEADS]
    expected = [float(logits[top]) - float(logits[alternative]) for logits in theirs]
    sets = [(head,) for head in TARGETED_HEADS] + [()]
    ours = ta.logit_differences(smollm2, run, sets, top, alternative, mode, ab.head_means(smollm2) if means is not None
                                else None)
    np.testing.assert_allclose(ours[:-1], expected, atol=ATOL_LOGITS, rtol=0)
    assert ours[-1] == pytest.approx(float(clean[top]) - float(clean[alternative]), abs=ATOL_LOGITS)
    assert np.ptp(expected) > 100 * ATOL_LOGITS  # the heads move d differently
