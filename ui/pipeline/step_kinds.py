"""The steps of the pipeline as such: one ``StepKind`` record per step Step by step can show, in pipeline
order, true of every run. About reads the table for "why each step exists", Step by step for its
"Jump to" line; ``build_steps`` (``ui/pipeline/steps.py``) and the variants' steps
(``ui/pipeline/kernel_steps.py``) make ``Step`` records that name their kind here, and a test fails when
one has no record. A new step is one row here, where it goes in the pipeline, plus its builder.
"""

from __future__ import annotations

from dataclasses import dataclass

from ui.i18n import N_


@dataclass(frozen=True)
class StepKind:
    """A step of the pipeline as such, true of every run: its anchor, names and one line on why it exists."""

    slug: str  # the section's anchor, and ``Step.slug``
    title: str  # general title (a run's own may say more, e.g. "Softmax₁ (with the null key)")
    short_name: str  # the "Jump to" line of Step by step
    summary: str  # one line, true whatever the options: the About page's "why"


# Every step ``build_steps`` and the variants can make, in pipeline order (optional ones where they go when on;
# the variants' steps (issue 26) where they replace or follow the softmax head's).
STEP_KINDS: dict[str, StepKind] = {kind.slug: kind for kind in (
    StepKind("input", N_("Token embeddings E"), "E",
             N_("Each token starts as a vector of d_model numbers, one row per token (in cross-attention the keys and "
                "values come from a second sentence).")),
    StepKind("positional", N_("Add positional encoding"), "+\u00a0P",
             N_("Attention alone cannot tell word order; a scheme that adds to the tokens (sinusoidal) makes 'the' at "
                "position 0 differ from 'the' at 4.")),
    StepKind("qkv", N_("Project to queries, keys and values"), "Q,\u00a0K,\u00a0V",
             N_("Three learned views of each token: what it looks for (Q), what it can be found by (K), what it hands "
                "over (V).")),
    StepKind("mla_latent", N_("Compress keys and values to a latent (MLA)"), N_("latent"),
             N_("Multi-head latent attention keeps one latent vector of r numbers per token; every head's keys and "
                "values are up-projections of it, and a few decoupled features carry RoPE.")),
    StepKind("split", N_("Split into heads"), N_("heads"),
             N_("The columns are cut into nh blocks so that several small attentions run side by side, each free to "
                "look for something different.")),
    StepKind("kv_share", N_("Share keys and values among query heads"), N_("K/V\u00a0sharing"),
             N_("A group of query heads reads one key/value head: fewer keys and values to compute and to cache "
                "(grouped-query attention; one for all heads is multi-query).")),
    StepKind("qk_norm", N_("Normalise q and k (QK-norm)"), "QK-norm",
             N_("Each head's q and k are RMS-normalised with learned gains before positions turn them: no scaled "
                "score can be larger than scale · d_k · max|g_q| · max|g_k|.")),
    StepKind("rope", N_("Rotate queries and keys by position (RoPE)"), "RoPE",
             N_("Each pair of features of q and k is turned by an angle proportional to its position, so a score "
                "depends on the offset i − j only.")),
    StepKind("part_rope", N_("Rotate the RoPE features by position"), "RoPE",
             N_("Only some features turn: MLA's decoupled ones, or each half of a differential head on its own.")),
    StepKind("scores", N_("Scores QKᵀ"), "QKᵀ",
             N_("One dot product per (query, key) pair: how well they match.")),
    StepKind("mla_absorb", N_("Absorbed scores: the same scores without building K (MLA)"), N_("absorbed"),
             N_("W_UK can be folded into the query, q·(c W_UK) = (q W_UKᵀ)·c, so a decoder scores against the cached "
                "latent directly.")),
    StepKind("scale", N_("Scale"), N_("scale"),
             N_("Dot products grow with the head size; scaling them (1/√d_k by default) keeps the softmax from "
                "saturating.")),
    StepKind("alibi", N_("Add a positional bias to the logits (ALiBi)"), N_("bias"),
             N_("A scheme with a bias adds a number of the positions i and j to each logit (ALiBi: a penalty growing "
                "with the distance |i − j|, steeper in some heads than in others).")),
    StepKind("mask", N_("Mask"), N_("mask"),
             N_("Some pairs are forbidden (the future in a decoder, padding): their logit becomes −∞, their weight "
                "exactly 0.")),
    StepKind("softmax", N_("Softmax, row by row"), "softmax",
             N_("Each row becomes weights ≥ 0 that sum to 1; with the null key (softmax₁) to at most 1, the rest "
                "going to an implicit key of value 0.")),
    StepKind("diff_maps", N_("Two softmax maps per head (differential)"), "A₁,\u00a0A₂",
             N_("The two halves of a head's q and k give two softmax maps over the same keys.")),
    StepKind("diff_combine", N_("Subtract: A₁ − λA₂ (differential)"), "A₁−λA₂",
             N_("The second map, times a learned λ, is subtracted from the first: attention both maps give (noise) "
                "cancels; weights can be negative and a row sums to 1 − λ.")),
    StepKind("linear_phi", N_("Feature map φ = elu + 1 (linear)"), "φ",
             N_("Linear attention replaces exp(q·k) with φ(q)·φ(k): φ > 0 keeps every similarity positive.")),
    StepKind("linear_weights", N_("Similarities over their row sum (linear)"), "φφᵀ/Σ",
             N_("Each row of φ(Q)φ(K)ᵀ, masked, divided by its sum: weights ≥ 0 that sum to 1, without a softmax.")),
    StepKind("linear_state", N_("The recurrent form: a state of constant size (linear)"), N_("state"),
             N_("Under a causal mask, S_t = S_{t−1} + φ(k_t)v_tᵀ and z_t = z_{t−1} + φ(k_t) give the same heads; a "
                "decoder keeps S and z instead of a growing cache.")),
    StepKind("moba_gate", N_("Choose blocks: q · mean key, top-k (MoBA)"), N_("blocks"),
             N_("MoBA scores each block of keys by q · its mean key and keeps the query's own block and the best "
                "earlier ones, k in all; no learned parameter.")),
    StepKind("dsa_index", N_("Choose keys: the lightning indexer, top-k (DSA)"), N_("indexer"),
             N_("DeepSeek Sparse Attention's small indexer scores every earlier token from the layer's input; each "
                "query keeps its k best keys.")),
    StepKind("sparse_keep", N_("Softmax over the kept keys, beside the dense row (sparse)"), N_("kept"),
             N_("The softmax runs over the chosen keys only; beside it the dense row and ‖o_sparse − o_dense‖ per "
                "query.")),
    StepKind("sink_weights", N_("Softmax with a learned sink, its column dropped (sinks)"), "[L|s]",
             N_("One learned logit per head joins every row, the softmax is taken, and its column is dropped: the "
                "keys' weights sum to less than 1, the sink taking the rest (gpt-oss).")),
    StepKind("deltanet_gates", N_("Normalise q and k; β and α from x (Gated DeltaNet)"), "q̂,\u00a0k̂,\u00a0β,\u00a0α",
             N_("Gated DeltaNet L2-normalises q and k and makes a step size β_t and a decay α_t per head from each "
                "token's input.")),
    StepKind("deltanet_matrix", N_("The implied matrix M (Gated DeltaNet)"), "M",
             N_("The state is linear in the values: o_i = Σ_j M_ij v_j, with M built from the decays and the delta "
                "rule's corrections; signed, 0 above the diagonal.")),
    StepKind("deltanet_forms", N_("Three forms, one output; a state of constant size (Gated DeltaNet)"), N_("state"),
             N_("The recurrence, the chunked form and M V give the same heads; a decoder keeps only the state S.")),
    StepKind("mix", N_("Weighted sum of values A·V"), "A·V",
             N_("Each query receives the sum of the value rows weighted by its attention weights.")),
    StepKind("output_gate", N_("Gate each head's output: Y ⊙ σ(X W_θ) (gated)"), N_("gate"),
             N_("Each head's A·V is multiplied, feature by feature, by a sigmoid gate made from the token's input, "
                "before W_O: a head can hand on less without moving its weights (Qwen3-Next).")),
    StepKind("diff_norm", N_("Normalise each head, times 1 − λ_init (differential)"), N_("norm"),
             N_("Each head's output is RMS-normalised on its own and multiplied by 1 − λ_init before the heads are "
                "concatenated.")),
    StepKind("concat", N_("Concatenate the heads"), N_("concat"),
             N_("The heads' outputs are laid side by side again, head 0 first, one row per token.")),
    StepKind("output", N_("Output projection W_O"), "W\\_O",
             N_("The output projection W_O mixes the heads; without it each output column belongs to one head.")),
)}
