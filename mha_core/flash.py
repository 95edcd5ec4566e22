"""FlashAttention, simulated: attention computed tile by tile with the online softmax, every step kept.

A fused kernel (Dao et al. 2022, FlashAttention; Dao 2023, FlashAttention-2) never writes the
(Tq, Tk) matrix of scores or weights to the GPU's main memory ("HBM"). It loads a block of B_r query
rows and, one after another, blocks of B_c keys and values into the small on-chip memory ("SRAM"),
and keeps three things per query row while it sweeps the keys:

    m   the largest logit seen so far           (starts at -inf; at 0 with the null key)
    l   the sum of exp(logit - m) so far        (starts at 0;    at 1 with the null key)
    O~  the sum of exp(logit - m) * v so far    (starts at 0: the null key's value is 0)

When a new tile brings a larger maximum, what was summed so far was measured against the old one:
both l and O~ are multiplied by the rescale factor exp(m_old - m_new) <= 1 before the tile is added.
After the last tile O = O~ / l is exactly softmax(S) V, and m + log l is the row's log-sum-exp, the one
number per row a kernel saves so that the backward pass can recompute any weight as exp(S_ij - lse_i).
The weights themselves are never stored.

The loop order is FlashAttention-2's: the outer loop over query blocks (one thread block each on a
GPU), the inner loop over key/value blocks. A tile that the mask blocks entirely is skipped: its keys
and values are never loaded (for a causal mask, every tile above the diagonal).

How each setting of the layer enters the loop is one record of ``KERNEL_RULES``; ``kernel_problem``
walks them and says when a configuration cannot be tiled. Pure NumPy, shapes as in ``mha_core``
(br, bc: a tile's rows and columns).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from mha_core.config import MHAConfig, RunResult, attention_scheme
from mha_core.marks import N_, Message
from mha_core.positions import position_scheme

# ---- what a configuration does inside the tile loop: one record per setting ------------------


@dataclass(frozen=True)
class KernelRule:
    """One setting of the layer and where the tiled kernel meets it.

    ``applies(config)``: the setting is in force; ``enters``: how the kernel handles it, in a sentence;
    ``refuse(config)``: why the kernel cannot handle this configuration, or None when it can.
    """

    name: str
    applies: Callable[[MHAConfig], bool]
    enters: str
    refuse: Callable[[MHAConfig], str | None] = lambda config: None
    label: Callable[[MHAConfig], str] | None = None  # its name for one configuration (e.g. the scheme's own)

    def named(self, config: MHAConfig) -> str:
        """The rule's name as the page shows it for ``config``."""
        return self.name if self.label is None else self.label(config)


def _scheme_refusal(config: MHAConfig) -> str | None:
    """A positional scheme the kernel can place: added to the tokens, turning q and k, or a bias of (i, j)."""
    scheme = config.positions
    known = scheme.add_to_tokens is not None or scheme.turns or scheme.bias is not None or not scheme.inside_attention
    if known:
        return None
    return Message(N_("the positional scheme {pe!r} acts inside attention in a way the tiled kernel does not know "
                      "(it knows: added to the tokens, q and k turned, a bias computed from positions i and j)"),
                   pe=config.pe)


KERNEL_RULES: tuple[KernelRule, ...] = (
    KernelRule(N_("positional scheme"), lambda c: c.positions.acts,
               N_("placed by what its record does: added to x, q and k turned, or a bias per tile"), _scheme_refusal,
               lambda c: Message(N_("positional scheme: {name}"), name=Message(c.positions.short_label))),
    KernelRule(N_("scale"), lambda c: True,
               N_("each tile of scores is multiplied by the layer's one scale factor as it is made")),
    KernelRule(N_("mask"), lambda c: c.mask != "none",
               N_("inside a tile, masked logits are −∞; a tile whose every pair is masked is skipped (never loaded)")),
    KernelRule(N_("q and k turned"), lambda c: c.positions.turns,
               N_("q and k are turned before the kernel (as in real models): the kernel receives rotated Q and K"),
               label=lambda c: Message(N_("{name}: q and k turned"), name=Message(c.positions.short_label))),
    KernelRule(N_("a bias on the logits"), lambda c: c.positions.has_bias,
               N_("the bias of a tile (a function of its rows' and columns' positions) is computed, never read"),
               label=lambda c: Message(N_("{name}: a bias on the logits"), name=Message(c.positions.short_label))),
    KernelRule(N_("positions added to the tokens"), lambda c: c.positions.add_to_tokens is not None,
               N_("added to x before the projections: the kernel never sees them")),
    KernelRule(N_("shared K/V heads (GQA/MQA)"), lambda c: c.key_value_heads != c.n_heads,
               N_("query head h loads the tiles of K/V head h // (nh/kv): the same tiles serve a whole group")),
    KernelRule(N_("null key"), lambda c: c.null_key,
               N_("the running state starts at m = 0, ℓ = e^0 = 1, O~ = 0: the null key's logit 0 and value 0, "
                  "counted before the first tile")),
    KernelRule(N_("cross-attention"), lambda c: c.is_cross,
               N_("the query blocks come from one sentence and the key/value blocks from the other")),
    KernelRule(N_("attention kernel"), lambda c: not c.attention_kernel.tiled,
               N_("the online softmax tiles a softmax head only"),
               lambda c: Message(N_("the {kernel} kernel's weights are not the softmax of the logits that this tile "
                                    "loop computes; choose Attention kernel: softmax"), kernel=c.kernel)),
    KernelRule(N_("after the kernel"), lambda c: c.attention_kernel.after_tiles is not None,
               N_("the tiles are the softmax head's; the finished O is multiplied, feature by feature, after the kernel"),
               label=lambda c: Message(N_("{name}: after the kernel"), name=Message(c.attention_kernel.short_label))),
    KernelRule(N_("multi-head latent attention"), lambda c: bool(c.mla_rank),
               N_("keys and values would be up-projected from the latent inside the kernel"),
               lambda c: N_("this stepper tiles ordinary keys and values; set the latent rank (mla_rank) to 0")),
)


def kernel_problem(config: MHAConfig) -> str | None:
    """Why ``config`` cannot run tiled, from the first rule that refuses it; None when it can."""
    for rule in KERNEL_RULES:
        if rule.applies(config) and (reason := rule.refuse(config)) is not None:
            return reason
    return None


def kernel_rules_in_force(config: MHAConfig) -> list[KernelRule]:
    """The rules of the settings ``config`` uses, in table order."""
    return [rule for rule in KERNEL_RULES if rule.applies(config)]


# ---- block sizes -------------------------------------------------------------------------------


def block_problem(block_rows, block_cols, tq: int, tk: int) -> str | None:
    """Why B_r, B_c cannot tile a (Tq, Tk) problem, or None: each must be a whole number in 1..T."""
    for name, size, limit in ((Message(N_("B_r (query rows per tile)")), block_rows, tq),
                              (Message(N_("B_c (keys per tile)")), block_cols, tk)):
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or not 1 <= size <= limit:
            return Message(N_("{name} must be a whole number from 1 to {limit}, got {size!r}"), name=name, limit=limit,
                           size=size)
    return None


def tile_bounds(length: int, block: int) -> list[tuple[int, int]]:
    """[(start, stop), ...] of the blocks of ``block`` positions covering 0..length-1 (the last may be shorter)."""
    return [(start, min(start + block, length)) for start in range(0, length, block)]


def tile_count(tq: int, tk: int, block_rows: int, block_cols: int) -> int:
    """Number of tiles: ceil(Tq / B_r) * ceil(Tk / B_c)."""
    return math.ceil(tq / block_rows) * math.ceil(tk / block_cols)


# ---- one tile's arithmetic ---------------------------------------------------------------------


def tile_is_skipped(allowed: np.ndarray | None) -> bool:
    """True when the mask blocks every (query, key) pair of the tile (br, bc): its K, V need never be loaded."""
    return allowed is not None and not allowed.any()


def tile_logits(q_rows: np.ndarray, k_cols: np.ndarray, scale: float, bias: np.ndarray | None,
                allowed: np.ndarray | None) -> np.ndarray:
    """S_ij = Q_i K_j^T * scale (+ bias), -inf where masked: (br, hs), (bc, hs) -> (br, bc)."""
    logits = (q_rows @ k_cols.T) * scale  # (br, bc)
    if bias is not None:
        logits = logits + bias  # (br, bc)
    if allowed is not None:
        logits = np.where(allowed, logits, -np.inf)  # (br, bc)
    return logits


def running_max(m_old: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """m_new = max(m_old, the tile's row maxima): (br,), (br, bc) -> (br,)."""
    return np.maximum(m_old, logits.max(axis=1))  # (br,)


def rescale_factor(m_old: np.ndarray, m_new: np.ndarray) -> np.ndarray:
    """exp(m_old - m_new), in (0, 1]: how much the sums so far shrink when the maximum grows, (br,).

    A row that has seen only masked keys (m_new = -inf) has nothing summed yet: its factor is 1.
    """
    with np.errstate(invalid="ignore"):
        return np.where(np.isneginf(m_new), 1.0, np.exp(m_old - m_new))  # (br,)


def tile_exponentials(logits: np.ndarray, m_new: np.ndarray) -> np.ndarray:
    """P~_ij = exp(S_ij - m_new), 0 where masked: (br, bc), (br,) -> (br, bc). Never above 1."""
    shifted = np.where(np.isneginf(logits), -np.inf, logits - np.where(np.isneginf(m_new), 0.0, m_new)[:, None])
    return np.exp(shifted)  # (br, bc)


# ---- the records -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Traffic:
    """Numbers moved between HBM and SRAM by one head, standard attention against the tiled kernel.

    Standard attention (FlashAttention's Algorithm 0) reads Q, K, writes S (Tq x Tk), reads S back and
    writes P, reads P and V and writes O. The tiled kernel reads each query block once, the K and V
    blocks of every tile it does not skip, and writes O and the log-sum-exp. Index rules (causal,
    window, padding, ALiBi) cost no reads; a custom mask's bits are not counted.
    """

    tq: int
    tk: int
    hs: int
    hv: int
    block_rows: int
    block_cols: int
    tiles: int
    tiles_skipped: int
    flash_reads: int  # counted in the loop
    flash_writes: int
    skipped_keys: int = 0  # the skipped tiles' widths summed (a last, shorter key tile counts its own width)

    @property
    def standard_reads(self) -> int:
        """Q, K (2 reads of Tq hs and Tk hs), S, P (Tq Tk each), V (Tk hv)."""
        return self.tq * self.hs + self.tk * self.hs + 2 * self.tq * self.tk + self.tk * self.hv

    @property
    def standard_writes(self) -> int:
        """S and P (Tq Tk each), O (Tq hv)."""
        return 2 * self.tq * self.tk + self.tq * self.hv

    @property
    def flash_reads_without_skipping(self) -> int:
        """Q once, and K, V once per query block: Tq hs + ceil(Tq/B_r) Tk (hs + hv)."""
        return self.tq * self.hs + math.ceil(self.tq / self.block_rows) * self.tk * (self.hs + self.hv)

    @property
    def flash_reads_by_formula(self) -> int:
        """``FLASH_READS_FORMULA``: the reads without skipping, less K and V of every skipped tile's own keys."""
        return self.flash_reads_without_skipping - self.skipped_keys * (self.hs + self.hv)

    @property
    def sram_numbers(self) -> int:
        """On chip for one tile: Q_i (B_r hs), K_j (B_c hs), V_j (B_c hv), S_ij (B_r B_c), O_i (B_r hv), m, l (2 B_r)."""
        br, bc = self.block_rows, self.block_cols
        return br * self.hs + bc * self.hs + bc * self.hv + br * bc + br * self.hv + 2 * br

    @property
    def weights_numbers(self) -> int:
        """What returning the weights would store: Tq Tk numbers per head."""
        return self.tq * self.tk


STANDARD_READS_FORMULA = "Tq·hs + Tk·hs + 2·Tq·Tk + Tk·hv"
STANDARD_WRITES_FORMULA = "2·Tq·Tk + Tq·hv"
FLASH_READS_FORMULA = "Tq·hs + ⌈Tq/B_r⌉·Tk·(hs + hv) − w_skip·(hs + hv)"  # w_skip: the skipped tiles' widths summed
FLASH_WRITES_FORMULA = "Tq·hv + Tq  (O and the log-sum-exp)"
SRAM_FORMULA = "B_r·hs + B_c·hs + B_c·hv + B_r·B_c + B_r·hv + 2·B_r"
PAPER_FORMULA = N_(
    "Counted here: FlashAttention-2's loop order (Dao 2023), query blocks outside and key/value blocks inside: Q is "
    "read once and K, V once per query block, Θ(N·d + N²·d/B_r) reads for N tokens of head size d. With the block "
    "sizes FlashAttention chooses for an SRAM of M numbers (B_r = min(⌈M/4d⌉, d)) that is Θ(N²·d²/M) while "
    "M ≤ 4d², and Θ(N²) once M > 4d²: from there a larger SRAM reads no less. Theorem 2 of FlashAttention "
    "(Dao et al. 2022), Θ(N²·d²/M) for d ≤ M ≤ N·d, counts that paper's own loop order (key/value blocks "
    "outside, every query block with its O, m and ℓ read and written again per key/value block), not the one "
    "counted here. Standard attention: Θ(N·d + N²)")


@dataclass(frozen=True)
class TileStep:
    """One tile of the kernel's loop, for query rows ``rows`` and keys ``cols`` (start, stop); arrays read-only.

    ``skipped``: the mask blocks every pair, so K_j, V_j were never loaded and the state did not change
    (``logits`` and ``exponentials`` are None then). Otherwise ``logits (br, bc)`` = S_ij (scaled, + bias,
    -inf where masked), ``exponentials (br, bc)`` = exp(S_ij - m_new). ``m_old``, ``m_new``, ``rescale``
    = exp(m_old - m_new), ``l_old``, ``l_new``: (br,); ``o_acc (br, hv)`` = O~ after the tile, unnormalised;
    ``o_partial (br, hv)`` = O~ / l_new, the output over the keys seen so far (0 where l_new = 0).
    """

    index: int  # position in the kernel's order
    row_block: int
    col_block: int
    rows: tuple[int, int]
    cols: tuple[int, int]
    skipped: bool
    logits: np.ndarray | None
    exponentials: np.ndarray | None
    m_old: np.ndarray
    m_new: np.ndarray
    rescale: np.ndarray
    l_old: np.ndarray
    l_new: np.ndarray
    o_acc: np.ndarray
    o_partial: np.ndarray

    def __post_init__(self) -> None:
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)


@dataclass(frozen=True)
class FlashRun:
    """One head computed tile by tile: every step, the result, and the traffic; arrays read-only.

    ``output (Tq, hv)`` = softmax(S) V; ``m``, ``l``, ``lse (Tq,)`` the final running maximum, sum and
    log-sum-exp m + log l (-inf for a row with every key masked and no null key; its output is 0).
    ``after (Tq, hv)``: what multiplies the finished output after the kernel (``Kernel.after_tiles``), or None.
    """

    head: int
    block_rows: int
    block_cols: int
    steps: tuple[TileStep, ...]
    output: np.ndarray
    m: np.ndarray
    l: np.ndarray  # noqa: E741 (the paper's name)
    lse: np.ndarray
    traffic: Traffic
    null_key: bool
    after: np.ndarray | None = None

    def __post_init__(self) -> None:
        for value in self.__dict__.values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    @property
    def handed_on(self) -> np.ndarray:
        """(Tq, hv) what the head hands to the concatenation: ``output``, times ``after`` when there is one."""
        return self.output if self.after is None else self.output * self.after  # (Tq, hv)

    @property
    def skipped(self) -> list[tuple[int, int]]:
        """(row block, column block) of every tile the kernel skipped."""
        return [(s.row_block, s.col_block) for s in self.steps if s.skipped]

    def output_after(self, index: int) -> np.ndarray:
        """(Tq, hv) the output as it stands after step ``index``: finished blocks, the current partial one,
        NaN for rows whose block has not started."""
        out = np.full(self.output.shape, np.nan)  # (Tq, hv)
        for step in self.steps[: index + 1]:
            out[step.rows[0] : step.rows[1]] = step.o_partial
        return out

    def handed_on_after(self, index: int) -> np.ndarray:
        """(Tq, hv) ``output_after(index)``, times ``after`` when there is one: what the head hands on so far."""
        so_far = self.output_after(index)  # (Tq, hv)
        return so_far if self.after is None else so_far * self.after  # (Tq, hv)

    def lse_after(self, index: int) -> np.ndarray:
        """(Tq,) m + log l as it stands after step ``index`` (NaN for rows not started)."""
        out = np.full(self.lse.shape, np.nan)  # (Tq,)
        for step in self.steps[: index + 1]:
            with np.errstate(divide="ignore"):
                out[step.rows[0] : step.rows[1]] = step.m_new + np.log(step.l_new)
        return out


# ---- the kernel --------------------------------------------------------------------------------


def flash_attention_head(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    block_rows: int,
    block_cols: int,
    scale: float,
    mask: np.ndarray | None = None,
    bias: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    null_key: bool = False,
    head: int = 0,
) -> FlashRun:
    """One head's attention, tile by tile, in FlashAttention-2's order, every step recorded.

    Parameters
    ----------
    q : ndarray, shape (Tq, hs), already turned when RoPE is on
    k : ndarray, shape (Tk, hs), the key/value head this query head reads (turned with RoPE)
    v : ndarray, shape (Tk, hv)
    block_rows, block_cols : int, B_r and B_c, each from 1 to Tq (Tk)
    scale : float, the factor applied to q.k
    mask : bool ndarray, shape (Tq, Tk), True = may attend; None = every key
    bias : function (query positions (br,), key positions (bc,)) -> (br, bc), added to the scaled
        scores of a tile (ALiBi's -m_h |i - j| for this head); None = no bias
    null_key : bool, softmax_1: the state starts with the null key's logit 0 and value 0 counted

    Returns
    -------
    FlashRun
        ``output`` equals ``multi_head_attention``'s head output, ``lse`` the row log-sum-exp.
    """
    tq, tk, hv = q.shape[0], k.shape[0], v.shape[-1]
    problem = block_problem(block_rows, block_cols, tq, tk)
    if problem is not None:
        raise ValueError(problem)
    row_tiles, col_tiles = tile_bounds(tq, block_rows), tile_bounds(tk, block_cols)
    steps: list[TileStep] = []
    output = np.zeros((tq, hv))  # (Tq, hv)
    m_all, l_all = np.zeros(tq), np.zeros(tq)  # (Tq,) each
    reads, writes = 0, 0
    for i, rows in enumerate(row_tiles):
        r0, r1 = rows
        reads += (r1 - r0) * q.shape[1]  # Q_i loaded once per query block
        m, l, acc, loaded = _query_block(i, rows, col_tiles, q, k, v, scale, mask, bias, null_key, steps)  # noqa: E741 (ℓ, as in the paper)
        reads += loaded
        output[r0:r1] = _normalised(acc, l)  # (br, hv), written once
        m_all[r0:r1], l_all[r0:r1] = m, l
        writes += (r1 - r0) * (hv + 1)  # O_i and its log-sum-exp
    with np.errstate(divide="ignore"):
        lse = m_all + np.log(l_all)  # (Tq,)
    traffic = Traffic(tq, tk, q.shape[1], hv, block_rows, block_cols, len(steps),
                      sum(s.skipped for s in steps), reads, writes,
                      sum(s.cols[1] - s.cols[0] for s in steps if s.skipped))
    return FlashRun(head, block_rows, block_cols, tuple(steps), output, m_all, l_all, lse, traffic, bool(null_key))


def _query_block(i: int, rows: tuple[int, int], col_tiles, q, k, v, scale: float, mask, bias, null_key: bool,
                 steps: list[TileStep]):
    """Query block ``i`` against every key tile in order (appending one ``TileStep`` each to ``steps``):
    its running max m (br,), sum l (br,), unnormalised output (br, hv), and the numbers loaded for K and V."""
    r0, r1 = rows
    m = np.full(r1 - r0, 0.0 if null_key else -np.inf)  # (br,)
    l = np.full(r1 - r0, 1.0 if null_key else 0.0)  # noqa: E741  (br,)
    acc = np.zeros((r1 - r0, v.shape[-1]))  # (br, hv)
    loaded = 0
    for j, (c0, c1) in enumerate(col_tiles):
        allowed = None if mask is None else mask[r0:r1, c0:c1]  # (br, bc)
        if tile_is_skipped(allowed):
            steps.append(_skipped_step(len(steps), i, j, (r0, r1), (c0, c1), m, l, acc))
            continue
        loaded += (c1 - c0) * (k.shape[1] + v.shape[1])  # K_j and V_j
        tile_bias = None if bias is None else bias(np.arange(r0, r1), np.arange(c0, c1))  # (br, bc)
        logits = tile_logits(q[r0:r1], k[c0:c1], scale, tile_bias, allowed)  # (br, bc)
        m_new = running_max(m, logits)  # (br,)
        rescale = rescale_factor(m, m_new)  # (br,)
        p = tile_exponentials(logits, m_new)  # (br, bc)
        l_new = rescale * l + p.sum(axis=1)  # (br,)
        acc = rescale[:, None] * acc + p @ v[c0:c1]  # (br, hv)
        steps.append(TileStep(len(steps), i, j, (r0, r1), (c0, c1), False, logits, p, m, m_new, rescale, l,
                              l_new, acc, _normalised(acc, l_new)))
        m, l = m_new, l_new  # noqa: E741
    return m, l, acc, loaded


def _normalised(acc: np.ndarray, l: np.ndarray) -> np.ndarray:  # noqa: E741
    """O~ / l, rows with l = 0 (nothing to attend to) left at 0: (br, hv), (br,) -> (br, hv)."""
    return acc / np.where(l > 0, l, 1.0)[:, None]  # (br, hv)


def _skipped_step(index, i, j, rows, cols, m, l, acc) -> TileStep:  # noqa: E741
    """A tile the mask blocks entirely: nothing loaded, the state passes through unchanged."""
    return TileStep(index, i, j, rows, cols, True, None, None, m, m, np.ones_like(m), l, l, acc, _normalised(acc, l))


def flash_of_run(result: RunResult, head: int, block_rows: int, block_cols: int) -> FlashRun:
    """Head ``head`` of an engine run, recomputed by the tiled kernel from the run's Q, K, V (after RoPE); a kernel
    whose head multiplies O afterwards (``Kernel.after_tiles``: gated attention's gate) gives ``after`` from its parts.

    ValueError when the configuration or the block sizes cannot be tiled (``kernel_problem``, ``block_problem``).
    """
    config, trace = result.config, result.trace
    problem = kernel_problem(config)
    if problem is not None:
        raise ValueError(problem)
    g = trace.kv_head_of(head)
    scheme = position_scheme(attention_scheme(config))
    bias = None
    if scheme.bias is not None:
        def bias(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
            return scheme.bias(trace.n_heads, rows, cols)[head]  # (br, bc) this head's slope
    mask = None if result.mask is None else np.broadcast_to(result.mask, trace.logits.shape[1:])  # (Tq, Tk)
    tiled = flash_attention_head(trace.q[head], trace.k[g], trace.v[g], block_rows=block_rows, block_cols=block_cols,
                                 scale=trace.scale, mask=mask, bias=bias, null_key=config.null_key, head=head)
    after_tiles = config.attention_kernel.after_tiles
    if after_tiles is None:
        return tiled
    return replace(tiled, after=np.array(after_tiles(trace.kernel_parts, head), dtype=float))  # (Tq, hv)


def weights_from_lse(q: np.ndarray, k: np.ndarray, scale: float, lse: np.ndarray,
                     bias: np.ndarray | None = None, mask: np.ndarray | None = None) -> np.ndarray:
    """Any weight recomputed from the saved log-sum-exp, as the backward pass does: exp(S_ij - lse_i), (Tq, Tk).

    q (Tq, hs), k (Tk, hs), lse (Tq,); bias, mask (Tq, Tk) or None. Rows with lse = -inf give 0.
    """
    logits = tile_logits(q, k, scale, bias, mask)  # (Tq, Tk)
    finite = np.where(np.isneginf(lse), np.inf, lse)  # (Tq,) exp(-inf - inf) = 0 for fully masked rows
    return np.exp(logits - finite[:, None])  # (Tq, Tk)
