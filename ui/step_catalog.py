"""Every step the pipeline can show, with one teaching line each, read from ``ui.steps``' builders. No streamlit.

The About page's "Why each step exists" table comes from here, so a step that ``build_steps`` gains
(RoPE, ALiBi, K/V sharing did) is listed without an edit. ``CATALOG`` runs a few small
configurations that together switch every optional step on; the steps are merged in pipeline order,
one per slug. A step's line is the first sentence of its ``why`` that reads the same in every
configuration and head where the step is on (no head numbers, sizes or mask names), so it is a
statement about the step, not about one run; a step whose why has no such sentence takes its line
from ``GENERAL_LINES``. Where an option makes a sentence false ("sum to 1" with the null key), the
line says so (``CAVEATS``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mha_core.config import MHAConfig, run
from ui.steps import Step, build_steps, step_inputs

_SMALL = dict(tokens=("the", "cat", "sat", "down"), d_model=8, seed=1)

# Together these switch on every optional step (K/V sharing with RoPE and with ALiBi, sinusoidal
# positions, masks, the null key) and leave off what has an "off" text (no positions, no mask, no W_O);
# they differ in heads, masks and sizes, so that a sentence with a number or a name in it is told apart.
CATALOG = (
    MHAConfig(**_SMALL, n_heads=2, pe="sinusoidal", mask="causal"),
    MHAConfig(**_SMALL, n_heads=4, kv_heads=2, pe="rope", mask="window", null_key=True),
    MHAConfig(**_SMALL, n_heads=2, pe="rope", mask="causal"),
    MHAConfig(**_SMALL, n_heads=2, kv_heads=1, pe="alibi", mask="causal", null_key=True),
    MHAConfig(tokens=("a", "b", "c"), d_model=12, n_heads=3, output_projection=False),
)

# (claim a step's line may make, what the trace says about the run, what the line must add then)
CAVEATS = (
    (re.compile(r"sums? to 1"), lambda trace: trace.null_key,
     "With the null key (softmax₁) a row sums to at most 1: the rest goes to an implicit key of logit 0."),
    (re.compile(r"weighted average"), lambda trace: trace.null_key,
     "With the null key, the weight the null key takes multiplies its value 0, so the output shrinks towards 0."),
)

# Lines for the steps whose why has no sentence free of this run's numbers (``catalog`` uses one only then;
# tests/test_step_catalog.py fails when a line here is no longer needed).
GENERAL_LINES = {
    "concat": "The heads' outputs are laid side by side again, head 0 first, into one row per token.",
}

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z*])")


@dataclass(frozen=True)
class CatalogEntry:
    """One step of the pipeline as the About page lists it."""

    slug: str
    title: str
    why: str  # one teaching line, plain text


def sentences(markdown: str) -> list[str]:
    """The sentences of a ``why`` text, bold markers removed."""
    text = markdown.replace("**", "").strip()
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()] if text else []


def merge_in_order(sequences: list[list[str]]) -> list[str]:
    """One list holding every item of ``sequences`` once, each list's order kept.

    A new item goes just before the next item of its own list already placed (an optional step goes
    in front of the step that follows it), or at the end.
    """
    merged: list[str] = []
    for sequence in sequences:
        for i, item in enumerate(sequence):
            if item in merged:
                continue
            later = [s for s in sequence[i + 1:] if s in merged]
            merged.insert(merged.index(later[0]) if later else len(merged), item)
    return merged


def _variants(configs) -> list[tuple[Step, object]]:
    """(step, trace) for every step of every configuration, for the first and the last head."""
    found = []
    for config in configs:
        result = run(config)
        inputs = step_inputs(result)
        for head in sorted({0, config.n_heads - 1}):
            found += [(step, result.trace) for step in build_steps(inputs, head)]
    return found


def _teaching_line(slug: str, variants: list[tuple[Step, object]]) -> str:
    """The first sentence shared by every variant where the step is on (else by every variant where it is off)."""
    on = [v for v in variants if v[0].panels]
    off = [v for v in variants if not v[0].panels and v[0].why]
    for group in (on, off):
        texts = [sentences(step.why) for step, _ in group]
        shared = [s for s in (texts[0] if texts else []) if all(s in t for t in texts)]
        if shared:
            line = shared[0]
            for claim, applies, caveat in CAVEATS:
                if claim.search(line) and any(applies(trace) for _, trace in group):
                    line += " " + caveat
            return line
    if slug in GENERAL_LINES:
        return GENERAL_LINES[slug]
    raise ValueError(f"step {slug!r} has no sentence that reads the same in every configuration: "
                     "give its why a general sentence, or a line in GENERAL_LINES")


def catalog(configs: tuple[MHAConfig, ...] = CATALOG) -> tuple[CatalogEntry, ...]:
    """Every step that ``configs`` switch on, in pipeline order, with its title and one teaching line (~15 ms)."""
    variants = _variants(configs)
    order = merge_in_order([[step.slug for step in build_steps(step_inputs(run(c)), 0)] for c in configs])
    entries = []
    for slug in order:
        mine = [v for v in variants if v[0].slug == slug]
        title = next((step.title for step, _ in mine if step.panels), mine[0][0].title)
        entries.append(CatalogEntry(slug, title, _teaching_line(slug, mine)))
    return tuple(entries)
