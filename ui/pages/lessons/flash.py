"""Lessons of issue 25 (FlashAttention, attention sinks), as records of ``ui.pages.lessons``: each asks the student to
predict first, then shows the numbers. ``LESSONS`` is a tuple for the lead to register in the lessons table.

Every claim is computed here from the engine (``mha_core.flash``, ``mha_core.cache_policy``) and checked again,
by other means, in ``tests/test_lesson_flash.py``. No streamlit in here.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

import numpy as np
import pandas as pd

from mha_core.cache_policy import policy_run
from mha_core.config import MHAConfig, run
from mha_core.decoder import decoder_config
from mha_core.flash import FlashRun, flash_of_run, weights_from_lse
from ui.charts.numbers import count
from ui.i18n import N_, _
from ui.pages.lessons.links import short_params
from ui.pages.lessons.records import BASE, Claim, Findings, Heatmap, Lesson, LessonPanel, tiny

TRAFFIC_LENGTHS = (8, 16, 32, 64)  # sentence lengths of the traffic table
SKIP_BLOCKS = (32, 16, 8, 4, 2, 1)  # block sizes of the causal-skipping table (64 tokens)
SINK_SENTENCE = ("the", "cat", "sat", "on", "a", "mat", "and", "then", "it", "ran", "off")
SINK_WINDOW = 3


def flash_link(config: MHAConfig, **page) -> str:
    """'flash?...': the FlashAttention page with ``config`` and the page's own settings (br, bc, tile)."""
    return "flash?" + urlencode({**short_params(config), **{k: str(v) for k, v in page.items()}})


# ---- 1. the online softmax: a later tile with a larger maximum ----------------------------------


def weights_so_far(kernel: FlashRun, row: int) -> np.ndarray:
    """(steps of the row's block, Tk) row ``row``'s weights as the kernel's state gives them after each of its tiles:
    exp(S_j - m) / l for the keys seen so far, 0 for keys not seen yet."""
    steps = [s for s in kernel.steps if s.rows[0] <= row < s.rows[1]]
    r = row - steps[0].rows[0]
    tk = steps[-1].cols[1]
    logits = np.full(tk, -np.inf)  # (Tk,)
    out = np.zeros((len(steps), tk))  # (steps, Tk)
    for n, step in enumerate(steps):
        if not step.skipped:
            logits[step.cols[0] : step.cols[1]] = step.logits[r]
        out[n] = np.exp(logits - step.m_new[r]) / step.l_new[r]
    return out


def busiest_row(kernel: FlashRun) -> int:
    """The query row whose maximum grows most often after its first tile (the last such row on a tie)."""
    counts = np.zeros(kernel.output.shape[0], dtype=int)  # (Tq,)
    for step in kernel.steps:
        if step.col_block > 0 and not step.skipped:
            counts[step.rows[0] : step.rows[1]] += step.m_new > step.m_old
    return int(len(counts) - 1 - np.argmax(counts[::-1]))


def online_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """The rescale factor shrinks what was summed; partial O moves towards the new keys; the end is exact."""
    config = panels[0].config
    result = run(config)
    kernel = flash_of_run(result, 0, 1, 1)  # one key per tile: every step can change the maximum
    row = busiest_row(kernel)
    grew = [s for s in kernel.steps if s.rows == (row, row + 1) and s.col_block > 0 and s.m_new[0] > s.m_old[0]]
    step = grew[-1]  # the last tile that brought a larger maximum
    share = step.rescale[0] * step.l_old[0] / step.l_new[0]  # what the keys seen before keep of the row
    before = kernel.steps[step.index - 1].o_partial[0]  # (hv,) partial O before the tile
    v_new = np.asarray(result.trace.v[0, step.cols[0]])  # (hv,) the new key's value
    mix = share * before + (1 - share) * v_new  # (hv,) the weighted average the claim states
    mix_gap = float(np.max(np.abs(mix - step.o_partial[0])))
    final_gap = float(np.max(np.abs(kernel.output - result.trace.heads[0])))
    others = [flash_of_run(result, 0, br, bc) for br, bc in ((2, 3), (6, 6), (4, 1))]
    blocks_gap = float(max(np.max(np.abs(k.output - kernel.output)) for k in others))
    labels = result.key_labels
    seen = weights_so_far(kernel, row)  # (Tk, Tk)
    claims = (
        Claim(_("Row {row}: the tile of key {key} raises the maximum from {old:.3f} to {new:.3f}, so ℓ and O~ are first "
                "multiplied by e^({old:.3f} − {new:.3f}) = {rescale:.3f}: a factor below 1, never above.").format(
            row=labels[row], key=labels[step.cols[0]], old=step.m_old[0], new=step.m_new[0], rescale=step.rescale[0]),
              bool(0 < step.rescale[0] < 1) and all(np.all(s.rescale <= 1) for s in kernel.steps)),
        Claim(_("After that tile the output so far is a weighted average: {share:.3f} × the old partial O + "
                "{rest:.3f} × the new key's value (max |Δ| = {gap}). A larger maximum pulls O towards the new key; the "
                "keys seen before keep their proportions among themselves.").format(share=share, rest=1 - share,
                                                                                    gap=tiny(mix_gap)),
              mix_gap <= 1e-12),
        Claim(_("After the last tile O equals the engine's softmax(S)·V (max |Δ| = {gap}), and other block sizes give "
                "the same output (max |Δ| = {blocks}).").format(gap=tiny(final_gap), blocks=tiny(blocks_gap)),
              final_gap <= 1e-12 and blocks_gap <= 1e-12),
    )
    figure = Heatmap(seen, [_("after key {key}").format(key=labels[j]) for j in range(seen.shape[0])], labels,
                     _("Row {row}: the weights the running state implies, tile by tile").format(row=labels[row]),
                     _("weight"), _("step"), _("key"))
    note = _("Each row is the state after one more tile (B_c = 1): exp(S_j − m) / ℓ for the keys seen so far. When a "
             "key with a larger logit arrives, every earlier weight shrinks by the same factor. The last row is the "
             "softmax itself. Step through it: {link}").format(link=flash_link(config, br=1, bc=1, tile=step.index))
    return Findings((figure,), claims, note=note)


# ---- 2. the weights were never stored -----------------------------------------------------------


def traffic_rows(base: MHAConfig, block: int) -> pd.DataFrame:
    """HBM numbers of one causal head, standard against tiled with B_r = B_c = ``block``, for several lengths."""
    rows = []
    for t in TRAFFIC_LENGTHS:
        config = replace(base, tokens=tuple(f"w{i}" for i in range(t)), mask="causal")
        traffic = flash_of_run(run(config), 0, min(block, t), min(block, t)).traffic
        rows.append({N_("tokens T"): t, N_("standard: HBM numbers"): traffic.standard_reads + traffic.standard_writes,
                     N_("tiled: HBM numbers"): traffic.flash_reads + traffic.flash_writes,
                     N_("weights to return (T²)"): traffic.weights_numbers})
    return pd.DataFrame(rows)


def never_stored_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    config = panels[0].config
    result = run(config)
    trace = result.trace
    kernel = flash_of_run(result, 0, 2, 2)
    rebuilt = weights_from_lse(trace.q[0], trace.k[0], trace.scale, kernel.lse, None, result.mask)  # (T, T)
    gap = float(np.max(np.abs(rebuilt - trace.weights[0])))
    table = traffic_rows(config, 8)
    last = table.iloc[-1]
    ratio = last["standard: HBM numbers"] / last["tiled: HBM numbers"]
    t = len(config.tokens)
    claims = (
        Claim(_("The kernel writes {writes} numbers for this head: O ({t} × {hv}) and one log-sum-exp per row. "
                "Returning the weights would add {weights} = {t}² more.").format(
            writes=count(kernel.traffic.flash_writes), t=t, hv=kernel.output.shape[1],
            weights=count(kernel.traffic.weights_numbers)),
              kernel.traffic.flash_writes == t * (kernel.output.shape[1] + 1) and kernel.traffic.weights_numbers == t * t),
        Claim(_("At {t} tokens, standard attention moves {standard} numbers through HBM and the tiled kernel "
                "{tiled}: {ratio:.1f}× fewer, and the gap widens with T (the T² terms are what it avoids).").format(
            t=int(last["tokens T"]), standard=count(last["standard: HBM numbers"]), tiled=count(last["tiled: HBM numbers"]),
            ratio=ratio),
              bool(np.all(np.diff(table["standard: HBM numbers"] / table["tiled: HBM numbers"]) > 0)) and ratio > 1),
        Claim(_("The saved log-sum-exp is enough to rebuild any weight as exp(S_ij − lse_i), tile by tile, as the "
                "backward pass does: max |Δ| against the engine's weights = {gap}.").format(gap=tiny(gap)),
              gap <= 1e-12),
    )
    figure = Heatmap(rebuilt, result.query_labels, result.key_labels, _("Weights rebuilt from the log-sum-exp"),
                     _("weight"), _("query"), _("key"))
    note = _("On the FlashAttention page: {link}").format(link=flash_link(config, br=2, bc=2))
    return Findings((figure,), claims, ((_("One causal head, B_r = B_c = 8 (numbers, not bytes)."), table),), note)


# ---- 3. causal skipping ------------------------------------------------------------------------


def skip_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    config = panels[0].config
    long = replace(config, tokens=tuple(f"w{i}" for i in range(64)))
    result = run(long)
    rows, gaps = [], []
    for block in SKIP_BLOCKS:
        kernel = flash_of_run(result, 0, block, block)
        tiles = len(kernel.steps)
        rows.append({"B_r = B_c": block, N_("tiles"): tiles, N_("skipped"): kernel.traffic.tiles_skipped,
                     N_("skipped (%)"): 100 * kernel.traffic.tiles_skipped / tiles})
        gaps.append(float(np.max(np.abs(kernel.output - result.trace.heads[0]))))
    table = pd.DataFrame(rows)
    small = run(config)
    kernel = flash_of_run(small, 0, 2, 2)
    skipped = kernel.skipped
    n = -(-len(config.tokens) // 2)
    above = [(i, j) for i in range(n) for j in range(n) if j > i]
    claims = (
        Claim(_("With {t} tokens in tiles of 2 × 2, the kernel skips the {n} tiles above the diagonal, {tiles}: every "
                "query in them comes before every key.").format(t=len(config.tokens), n=len(skipped),
                                                                tiles=", ".join(map(str, skipped))),
              skipped == above),
        Claim(_("At 64 tokens the skipped share grows as tiles shrink, from {first:.0f}% (tiles of {block}) to "
                "{last:.1f}% (tiles of 1), towards half.").format(first=table["skipped (%)"].iloc[0],
                                                                  block=SKIP_BLOCKS[0],
                                                                  last=table["skipped (%)"].iloc[-1]),
              bool(np.all(np.diff(table["skipped (%)"]) > 0)) and table["skipped (%)"].iloc[-1] < 50),
        Claim(_("Skipping changes no number: the output equals the engine's for every block size (max |Δ| = {gap}), "
                "because a skipped tile would only add exp(−∞) = 0.").format(gap=tiny(max(gaps))),
              max(gaps) <= 1e-12),
    )
    n_tiles = np.zeros((n, n))  # (tiles, tiles) 1 = computed, 0 = skipped
    for step in kernel.steps:
        n_tiles[step.row_block, step.col_block] = 0.0 if step.skipped else 1.0
    figure = Heatmap(n_tiles, [_("queries {first}–{last}").format(first=2 * i, last=2 * i + 1) for i in range(n)],
                     [_("keys {first}–{last}").format(first=2 * j, last=2 * j + 1) for j in range(n)],
                     _("Tiles computed (1) and skipped (0)"), _("computed"), _("query block"), _("key block"))
    note = _("On the FlashAttention page: {link}").format(link=flash_link(config, br=2, bc=2))
    return Findings((figure,), claims, ((_("64 tokens, causal."), table),), note)


# ---- 4. attention sinks ------------------------------------------------------------------------


def sink_deviation(config: MHAConfig, policy: str, sinks: int) -> float:
    """Relative change of the decoder's outputs under ``policy`` against the full cache: |out - full| / |full|."""
    result = run(decoder_config(config))
    full = np.stack([s.output[0] for s in policy_run(result, "full", SINK_WINDOW, 0, "original")])  # (T, C)
    out = np.stack([s.output[0] for s in policy_run(result, policy, SINK_WINDOW, sinks, "original")])  # (T, C)
    return float(np.linalg.norm(out - full) / np.linalg.norm(full))


def sink_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    sink_head, random_head = (p.config for p in panels)
    result = run(decoder_config(sink_head))
    full = policy_run(result, "full", SINK_WINDOW, 0, "original")
    on_first = float(np.mean([s.weights[:, 0, 0].mean() for s in full[SINK_WINDOW:]]))
    window = sink_deviation(sink_head, "window", 0)
    with_sink = sink_deviation(sink_head, "sinks", 1)
    random_window, random_sink = sink_deviation(random_head, "window", 0), sink_deviation(random_head, "sinks", 1)
    claims = (
        Claim(_("This hand-built head puts {share:.0%} of every row on the first token, as many trained heads park "
                "their spare weight there.").format(share=on_first), on_first > 0.99),
        Claim(_("A window of {window} tokens evicts it: the outputs change by {change:.0%} of their size (the head has "
                "nowhere to put its weight, so the softmax hands it to whatever is left).").format(
            window=SINK_WINDOW, change=window), window > 0.5),
        Claim(_("Keeping one sink (S = 1) besides the same window brings the change to {change}: what the head "
                "computes is back, to rounding (it gave the evicted recent tokens almost nothing).").format(
            change=tiny(with_sink)), with_sink <= 1e-6),
        Claim(_("A random head does not rely on token 0 as much: one sink reduces its change from {before:.0%} to "
                "{after:.0%}, less dramatic but still a gain.").format(before=random_window, after=random_sink),
              random_sink < random_window),
    )
    steps = policy_run(result, "window", SINK_WINDOW, 0, "original")
    rows = np.zeros((len(steps), len(steps)))  # (T, T)
    held = np.zeros(rows.shape, dtype=bool)  # (T, T) the keys the window holds at each step
    for step in steps:
        rows[step.position, step.held] = step.weights[0, 0]
        held[step.position, step.held] = True
    labels = result.query_labels
    figure = Heatmap(rows, labels, labels, _("Window of {window}, no sink: head 0").format(window=SINK_WINDOW),
                     _("weight"), _("query"), _("key"), allowed=held)
    note = _("The toy model has no loss to measure, so the change of the layer's output against the full cache stands "
             "in for StreamingLLM's perplexity. Try it on the Decoding page with cache=sinks.")
    return Findings((figure,), claims, note=note)


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        key="online_softmax",
        short_title=N_("Online softmax"),
        title=N_("The online softmax: a later tile with a larger maximum"),
        question=N_("Predict first: the kernel has summed some keys of a row; then a tile brings a key with a larger "
                    "logit than any before. What happens to the output O computed so far?"),
        source=N_("answered in Milakov & Gimelshein 2018 (online softmax) and Dao et al. 2022 (FlashAttention)"),
        source_url="https://arxiv.org/abs/2205.14135",
        panels=(LessonPanel(N_("One head, no mask"), replace(BASE, n_heads=1)),),
        explanation=N_(
            "The kernel keeps each row's running maximum m, its running sum ℓ of exp(logit − m) and an unnormalised "
            "output. A larger maximum means everything summed so far was measured against too small a reference: "
            "both are multiplied by e^(m_old − m_new), which is below 1, and the new tile is added. Nothing is lost "
            "or approximated, so the last tile leaves exactly softmax(S)·V, whatever the block sizes."
        ),
        findings=online_findings,
    ),
    Lesson(
        key="never_stored",
        short_title=N_("Weights never stored"),
        title=N_("Why fused kernels cannot return the attention weights"),
        question=N_("Predict first: FlashAttention computes every weight, so why does `need_weights=True` (or "
                    "`output_attentions=True`) make libraries fall back to the slow path?"),
        source=N_("asked in pytorch, transformers and flash-attention issues (e.g. Dao-AILab/flash-attention #1107)"),
        source_url="https://github.com/Dao-AILab/flash-attention/issues/1107",
        panels=(LessonPanel(N_("One head, causal"), replace(BASE, n_heads=1, mask="causal")),),
        explanation=N_(
            "Each weight exists for a moment, inside one tile in on-chip memory, and is overwritten by the next tile. "
            "Returning them means writing a T × T matrix per head to main memory, which is the traffic the kernel "
            "exists to avoid. It saves one log-sum-exp per row instead, from which the backward pass rebuilds any "
            "weight tile by tile."
        ),
        findings=never_stored_findings,
    ),
    Lesson(
        key="causal_skip",
        short_title=N_("Skipped tiles"),
        title=N_("Causal masks let the kernel skip tiles"),
        question=N_("Predict first: with a causal mask, what share of the tiles can a fused kernel skip, and does "
                    "skipping change any number?"),
        source=N_("answered in Dao 2023 (FlashAttention-2, section 3.1)"),
        source_url="https://arxiv.org/abs/2307.08691",
        panels=(LessonPanel(N_("One head, causal"), replace(BASE, n_heads=1, mask="causal")),),
        explanation=N_(
            "A tile whose every key comes after every query is entirely masked: its exponentials would all be "
            "exp(−∞) = 0, so the kernel never loads its keys and values. Tiles that straddle the diagonal are "
            "computed with the mask inside. Smaller tiles follow the triangle more closely, so the skipped share "
            "approaches one half, and the output is the same to the last bit of rounding."
        ),
        findings=skip_findings,
    ),
    Lesson(
        key="sinks",
        short_title=N_("Attention sinks"),
        title=N_("Attention sinks: why a sliding window collapses"),
        question=N_("Predict first: a head puts most of its weight on the first token. A sliding-window cache evicts "
                    "that token; what happens to the head's output, and what does keeping one 'sink' token change?"),
        source=N_("answered in Xiao et al. 2023, Efficient Streaming Language Models with Attention Sinks"),
        source_url="https://arxiv.org/abs/2309.17453",
        panels=(
            LessonPanel(N_("A first-token (sink) head"), replace(BASE, tokens=SINK_SENTENCE, init="first", mask="causal")),
            LessonPanel(N_("A random head"), replace(BASE, tokens=SINK_SENTENCE, mask="causal")),
        ),
        explanation=N_(
            "A softmax row must hand out all its weight, and trained heads with nothing to attend to park it on the "
            "first tokens. A window that evicts them forces that weight onto the recent tokens, and the output "
            "changes completely. Keeping the first few tokens forever besides the window (StreamingLLM's sinks) "
            "gives the weight its place back at the cost of S more keys."
        ),
        findings=sink_findings,
    ),
)
