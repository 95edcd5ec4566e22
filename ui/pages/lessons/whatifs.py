"""Lessons on SmolLM2's trained weights changed after training (issue 36), each with the Real model page's what-if
that shows it: which layers can lose 90% of their keys, the first token dropped (and sinks fitted in its place),
QK-norm added to a model that never had it.

The numbers come from ``mha_core.smollm2_whatif`` and ``mha_core.smollm2_qknorm`` on the first ``LESSON_TOKENS``
tokens of the calibration text (the page's, ``CALIBRATION_TEXT``), with the Real model page's model file (never
downloaded here); where it is missing the lesson says so. Each lesson's numbers are computed once per process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ui.i18n import N_, _, sentences
from ui.pages.lessons import gate_sinks, qknorm, sparse
from ui.pages.lessons.records import Claim, Findings, Lesson
from ui.pages.lessons.stored import measured_once

LESSON_TOKENS = 40  # the calibration text's first 40 tokens: 30 single-layer runs stay short
SPARSE_K = 2  # keys kept per query: on 40 tokens, 79 of the 820 visible (query, key) pairs, 90% dropped
TOLERATED = 0.05  # nats: a layer "can lose them" when made sparse alone it raises the loss by less than this
PAGE = "real_model"  # the Real model page's address (ui/state/page_table.py)


def lesson_run():
    """(model, run of the calibration text's first ``LESSON_TOKENS`` tokens); RuntimeError when the file is missing."""
    from mha_core import smollm2 as smol
    from mha_core.models import shared_smollm2
    from mha_core.smollm2_whatif import CALIBRATION_TEXT

    model = shared_smollm2(os.environ.get(smol.ENV_VAR))
    return model, model.forward(model.encode(CALIBRATION_TEXT)[:LESSON_TOKENS], traces=())


def missing(error: RuntimeError) -> Findings:
    return Findings((), (), warning=_("SmolLM2's model file was not found on this server ({why}): this lesson needs "
                                      "it.").format(why=str(error).splitlines()[0]))


def experiment_note(text: str, query: str) -> str:
    """The lesson's note and the link that opens its experiment on the Real model page."""
    return sentences(text, _("[Open the experiment on the Real model page]({link}).").format(link=f"{PAGE}?{query}"))


# ---- which layers can lose 90% of their keys ----


@dataclass(frozen=True)
class SparseNumbers:
    dense: float  # the mean loss as trained
    kept: int  # visible (query, key) pairs top-k keeps
    pairs: int  # visible (query, key) pairs
    alone: np.ndarray  # (L,) mean loss with top-k in that layer only
    together: float  # mean loss with top-k in every layer


@measured_once
def sparse_numbers() -> SparseNumbers:
    from mha_core.smollm2_whatif import sparse_losses

    model, run = lesson_run()
    t = run.n_tokens
    alone = np.array([sparse_losses(model, run, [layer], SPARSE_K).mean() for layer in range(model.config.n_layers)])
    together = float(sparse_losses(model, run, range(model.config.n_layers), SPARSE_K).mean())
    return SparseNumbers(float(model.prompt_losses(run).mean()), int(np.minimum(SPARSE_K, np.arange(1, t + 1)).sum()),
                         t * (t + 1) // 2, alone, together)


def sparse_findings(_panels) -> Findings:
    try:
        numbers = sparse_numbers()
    except RuntimeError as error:
        return missing(error)
    rise = numbers.alone - numbers.dense  # (L,)
    tolerant, worst = int((rise < TOLERATED).sum()), int(rise.argmax())
    dropped = 1 - numbers.kept / numbers.pairs
    claims = (
        Claim(_("On the calibration text's first {t} tokens, top-{k} keeps {kept} of the {pairs} visible (query, key) "
                "pairs: {dropped} of the keys are dropped.").format(
            t=LESSON_TOKENS, k=SPARSE_K, kept=numbers.kept, pairs=numbers.pairs, dropped=f"{100 * dropped:.1f}%"),
              dropped >= 0.9),
        Claim(_("Made sparse alone, {n} of the 30 layers raise the loss by less than {tol} nats (as trained: {dense}); "
                "the most sensitive is layer {worst}, +{rise}.").format(
            n=tolerant, tol=TOLERATED, dense=f"{numbers.dense:.3f}", worst=worst, rise=f"{rise[worst]:.3f}"),
              tolerant >= 20),
        Claim(_("All 30 layers sparse at once: {together} nats, +{rise}, more than any one layer's rise: the small "
                "losses add up.").format(together=f"{numbers.together:.3f}",
                                         rise=f"{numbers.together - numbers.dense:.3f}"),
              numbers.together - numbers.dense > rise.max()),
    )
    table = pd.DataFrame({N_("layer made sparse"): np.arange(rise.size), N_("loss (nats)"): numbers.alone,
                          N_("rise over dense"): rise})
    note = experiment_note(_("The page's sweep runs every k from 1 to 64, in the layers you choose, on the whole "
                             "calibration text or your prompt, beside MoBA's blocks."),
                           "model=smollm2&rm_sparse=all&rm_whatif_text=calibration")
    return Findings((), claims, ((_("Top-{k} in one layer at a time.").format(k=SPARSE_K), table),), note=note)


# ---- sinks without the sink token ----


@measured_once
def sink_numbers() -> tuple[dict[str, float], np.ndarray]:
    from mha_core.smollm2_whatif import first_token_mass, fit_sinks, sink_losses

    model, run = lesson_run()
    return sink_losses(model, run, fit_sinks(model, run)), first_token_mass(run)


def sink_findings(_panels) -> Findings:
    try:
        losses, mass = sink_numbers()
    except RuntimeError as error:
        return missing(error)
    needy = int((mass >= 0.3).sum())
    claims = (
        Claim(_("SmolLM2's heads put {mean} of their attention on the first token on average; {n} of {total} heads "
                "put at least 0.3 there.").format(mean=f"{mass.mean():.2f}", n=needy, total=mass.size), needy > 0),
        Claim(_("Drop the first token's column and renormalise: the loss goes from {with_} to {without} nats.").format(
            with_=f"{losses['with']:.3f}", without=f"{losses['without']:.3f}"), losses["without"] > losses["with"]),
        Claim(_("Give each head back its share with a fitted sink logit (gpt-oss's form): {fitted} nats; the null key "
                "(s = 0): {null}. Neither brings back the trained {with_}: the first token's value, not only its "
                "share, was doing work.").format(fitted=f"{losses['fitted']:.3f}", null=f"{losses['null']:.3f}",
                                                 with_=f"{losses['with']:.3f}"),
              min(losses["fitted"], losses["null"]) > losses["with"]),
    )
    note = experiment_note(_("The page fits one sink per head on the whole calibration text or your prompt and "
                             "lists the heads that needed one."), "model=smollm2&rm_sinks=1&rm_whatif_text=calibration")
    return Findings((), claims, note=note)


# ---- QK-norm after the fact ----


@measured_once
def qknorm_numbers():
    from mha_core.smollm2_qknorm import GAINS, qk_norm_run

    model, run = lesson_run()
    return {gain: qk_norm_run(model, run, range(model.config.n_layers), gain) for gain in GAINS}


def qknorm_findings(_panels) -> Findings:
    try:
        runs = qknorm_numbers()
    except RuntimeError as error:
        return missing(error)
    one, matched = runs["one"], runs["matched"]
    layer = int(one.before[:, 1].argmax())
    bound = 8.0  # scale · hs = 64 / √64 with gains 1
    claims = (
        Claim(_("As trained, layer {layer}'s largest logit is {top}; with q and k RMS-normalised and gains 1, no logit "
                "of any layer passes {bound} (largest: {after}).").format(
            layer=layer, top=f"{one.before[layer, 1]:.2f}", bound=f"{bound:g}", after=f"{np.abs(one.after).max():.2f}"),
              one.before[layer, 1] > bound >= np.abs(one.after).max()),
        Claim(_("QK-norm with gains 1 in all 30 layers: {one} nats against {dense} as trained.").format(
            one=f"{one.loss:.3f}", dense=f"{one.dense:.3f}"), one.loss > one.dense + 0.1),
        Claim(_("One gain per layer matched to the trained logits' spread: {matched} nats. The spread comes back, the "
                "loss does not: the weights were trained for q and k whose lengths carry information.").format(
            matched=f"{matched.loss:.3f}"), matched.loss > matched.dense + 0.1),
    )
    note = experiment_note(_("The page shows every layer's logit range before and after, in the layers you choose."),
                           "model=smollm2&rm_qknorm=all&rm_whatif_text=calibration")
    return Findings((), claims, note=note)


LESSONS = (
    Lesson(
        key="sparse_real",
        title=N_("Which layers of a trained model can lose 90% of their keys?"),
        short_title=N_("Sparse on real weights"),
        question=N_("If each query keeps only its few best keys, which of SmolLM2's layers still work? Predict: "
                    "early, middle or late layers?"),
        source=N_("MoBA and DeepSeek Sparse Attention apply selection to trained models"),
        source_url="https://arxiv.org/abs/2502.13189",
        panels=sparse.LESSONS[0].panels[:1],
        explanation=N_("Top-k keeps, for each query, the keys with the highest logit: what a head attends to most. "
                       "Most layers of a trained model spread little weight beyond their best few keys, so one layer "
                       "made sparse barely changes the next-token loss. Every layer at once is another matter: the "
                       "small errors flow into the next layers and add up."),
        findings=sparse_findings,
    ),
    Lesson(
        key="sinks_real",
        title=N_("Take away the sink token: does a fitted sink replace it?"),
        short_title=N_("Sinks on real weights"),
        question=N_("SmolLM2 sends a large share of its attention to the first token. Predict: if that token is "
                    "removed and each head gets a learned sink logit instead, does the loss come back?"),
        source=N_("gpt-oss's learned sinks; Xiao et al. (2023), attention sinks"),
        source_url="https://arxiv.org/abs/2309.17453",
        panels=gate_sinks.LESSONS[1].panels[1:],
        explanation=N_("A sink logit takes a share of each row and gives back nothing (no value). The first token "
                       "took the same share, but it also handed on its value vector, which the trained layers "
                       "learned to use. Fitting the share alone is not enough: the loss shows what the value did."),
        findings=sink_findings,
    ),
    Lesson(
        key="qknorm_real",
        title=N_("QK-norm added after training: why the gains must be learned"),
        short_title=N_("QK-norm on real weights"),
        question=N_("QK-norm keeps logits bounded. Predict: if we add it to SmolLM2, which never had it, does the "
                    "model still work? And if each layer gets a gain that restores its logits' spread?"),
        source=N_("QK-norm in OLMo 2, Qwen3 and Gemma 3"),
        source_url="https://arxiv.org/abs/2302.05442",
        panels=qknorm.LESSONS[0].panels[:1],
        explanation=N_("The norm divides each q and k by its own length. A trained model without it used those "
                       "lengths: a long key stands out for every query. The bound scale · hs caps how sharp a head "
                       "can be, and one gain per layer restores the overall spread, but not which tokens were long. "
                       "A model trained with QK-norm learns its gains and its W_Q, W_K together."),
        findings=qknorm_findings,
    ),
)
