"""Pure builders for the Decoding page's cache policy section: its link settings, what the cache holds at each
step, the rows under the policy, where RoPE places the keys, and where the evicted keys' weight goes.
No streamlit here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mha_core.attention import multi_head_attention
from mha_core.cache_policy import POLICIES, POSITIONINGS, PolicyStep
from mha_core.config import RunResult, attention_scheme
from ui.i18n import N_, _
from ui.state.settings import Setting

DEFAULT_WINDOW = 3

CACHE_SETTINGS: tuple[Setting, ...] = (
    Setting("cache", "choice", label=N_("Cache policy"), default="full",
            choices={name: policy.label for name, policy in POLICIES.items()}),
    Setting("cache_window", "int", label=N_("Window W (recent tokens kept, the new one included)"),
            default=lambda v: min(DEFAULT_WINDOW, len(v["tokens"])), limits=lambda v: (1, len(v["tokens"])),
            applies=lambda v: POLICIES[v["cache"]].slides),
    Setting("sinks", "int", label=N_("Sinks S (first tokens never evicted)"), default=1,
            limits=lambda v: (0, len(v["tokens"])), applies=lambda v: POLICIES[v["cache"]].sinks),
    Setting("cache_rope", "choice", label=N_("Positions inside the cache"), default="original",
            choices={name: p.label for name, p in POSITIONINGS.items()}),
)
SETTING = {row.name: row for row in CACHE_SETTINGS}


HELD, SINK, EVICTED = "■", "S", "✗"
STEP, CACHE_SIZE = N_("step t"), N_("cache size n")
TOKEN, TEXT_POSITION, USED_POSITION, DISTANCE, SLOT = (N_("token"), N_("position in the text"), N_("position used"),
                                                       N_("distance to the query"), N_("cache slot"))
TABLE_NAMES = (STEP, CACHE_SIZE, TOKEN, TEXT_POSITION, USED_POSITION, DISTANCE, SLOT)  # translated where shown


def held_table(steps: list[PolicyStep], labels: list[str], sinks: int) -> pd.DataFrame:
    """One row per step, one column per token: held (■), held as a sink (S), evicted at this step (✗)."""
    grid = pd.DataFrame("", index=pd.Index([s.position for s in steps], name=STEP), columns=labels)
    for step in steps:
        for position in step.held:
            grid.iat[step.position, position] = SINK if position < sinks else HELD
        for position in step.evicted:
            grid.iat[step.position, position] = EVICTED
    grid[CACHE_SIZE] = [s.cache_size for s in steps]
    return grid


def placed_weights(steps: list[PolicyStep]) -> np.ndarray:
    """(nh, T, T) each step's weights put at the original positions of its keys; keys not held get 0."""
    n_heads, t = steps[0].weights.shape[0], len(steps)
    rows = np.zeros((n_heads, t, t))  # (nh, T, T)
    for step in steps:
        rows[:, step.position, step.held] = step.weights[:, 0]  # (nh, n)
    return rows


def held_mask(steps: list[PolicyStep]) -> np.ndarray:
    """(T, T) True where step t's cache holds key j."""
    mask = np.zeros((len(steps), len(steps)), dtype=bool)  # (T, T)
    for step in steps:
        mask[step.position, step.held] = True
    return mask


def restricted_gap(result: RunResult, steps: list[PolicyStep], positioning: str) -> float:
    """max |Δ| between the policy's rows and the engine's attention over the same kept keys.

    Original positions: one full causal run masked to the held keys. Re-indexed: one engine call per step,
    the held tokens as keys at positions 0..n-1 and the query at n-1.
    """
    config, trace = result.config, result.trace
    options = dict(scale=trace.scale, kv_heads=config.key_value_heads, pe=attention_scheme(config),
                   rope_base=config.rope_base, null_key=config.null_key)
    if positioning == "original":
        engine = multi_head_attention(result.x_q, result.weights, config.n_heads, mask=held_mask(steps), **options)
        return float(np.max(np.abs(placed_weights(steps) - engine.weights)))
    gaps = []
    for step in steps:
        n = step.cache_size
        engine = multi_head_attention(result.x_q[[step.position]], result.weights, config.n_heads,
                                      x_k=result.x_q[step.held], q_positions=np.array([n - 1]),
                                      k_positions=np.arange(n), **options)
        gaps.append(np.max(np.abs(step.weights - engine.weights)))
    return float(max(gaps))


def positions_table(step: PolicyStep, labels: list[str]) -> pd.DataFrame:
    """The keys held at one step: their position in the text and the position RoPE / ALiBi give them."""
    return pd.DataFrame({TOKEN: [labels[p] for p in step.held], TEXT_POSITION: step.held,
                         USED_POSITION: step.key_positions, DISTANCE: step.query_position - step.key_positions},
                        index=pd.Index(range(step.cache_size), name=SLOT))


@dataclass(frozen=True)
class SpareMass:
    """Head ``head``'s row at one step: what full attention gave the keys now evicted, and where it went."""

    evicted_share: float  # full causal attention's weight on keys the cache no longer holds
    kept_gain: float  # how much more the kept keys get under the policy
    null_full: float  # the null key's weight under full attention (0 without it)
    null_policy: float  # ... under the policy


def spare_mass(step: PolicyStep, full: PolicyStep, head: int) -> SpareMass:
    """Where the weight of the evicted keys goes: to the kept keys (renormalised), and to the null key when on."""
    row = full.weights[head, 0]  # (t+1,) full attention over every earlier token
    gone = np.setdiff1d(np.arange(step.position + 1), step.held)
    kept_full = float(row[step.held].sum())
    return SpareMass(float(row[gone].sum()), float(step.weights[head, 0].sum()) - kept_full,
                     float(full.null_weight[head]), float(step.null_weight[head]))


def spare_sentence(mass: SpareMass, null_key: bool) -> str:
    """The spare mass in words (Markdown), in the reader's language."""
    if mass.evicted_share == 0:
        return _("Nothing has been evicted from this row yet: its weights are full attention's.")
    numbers = dict(evicted=f"{mass.evicted_share:.4f}", gain=f"{mass.kept_gain:+.4f}",
                   null_full=f"{mass.null_full:.4f}", null_policy=f"{mass.null_policy:.4f}")
    if not null_key:
        return _("Full attention gave the evicted keys **{evicted}** of this row. Under the policy the kept keys get "
                 "**{gain}** more: the softmax shares the evicted keys' weight out over the keys that remain (rows "
                 "still sum to 1).").format(**numbers)
    return _("Full attention gave the evicted keys **{evicted}** of this row. Under the policy the kept keys get "
             "**{gain}** more, and the null key's weight goes from {null_full} to **{null_policy}**: the evicted "
             "weight is split between the kept keys and the null key in proportion to e^logit (the null key's e^0 = "
             "1), so part of it goes nowhere (value 0).").format(**numbers)
