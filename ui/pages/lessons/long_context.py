"""Past the trained length: SmolLM2 reads a repeated text whose farthest tokens lie twice its trained length apart,
with RoPE as trained and with each scaling (``mha_core.smollm2_long``, the Real model page's *Longer than trained*).

The numbers come from the real model, the same file the page uses, never downloaded here; where it is missing the
lesson says so. Computed once per process: eight runs of 256 tokens (~1.2 s of CPU each on one thread).
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pandas as pd

from mha_core import smollm2_long as lg
from ui.charts.numbers import count
from ui.i18n import N_, _
from ui.pages.lessons.records import BASE, Claim, Findings, Heatmap, Lesson, LessonPanel
from ui.pages.lessons.stored import measured_once

N_TOKENS, FACTOR = 256, 2.0
SCALINGS = ("linear", "ntk", "yarn")  # the question's three
# The heatmap's row names, short: the table beside it names each method in full. Long names as rows (or as turned
# column labels) left the panel 64-117 px wide on a phone.
HEATMAP_ROWS = {"inside": N_("inside"), "trained": N_("as trained"), "linear": N_("PI (linear)"), "ntk": N_("NTK-aware"),
                "dynamic": N_("dynamic NTK"), "yarn": N_("YaRN"), "partial": N_("partial"), "nope4": N_("no RoPE ×¼")}


@measured_once
def measured() -> dict[str, lg.LongRun]:
    """Method -> its run on the built-in text at T = 256, s = 2. RuntimeError when the model file is missing."""
    from mha_core import smollm2 as smol
    from mha_core.models import shared_smollm2

    model = shared_smollm2(os.environ.get(smol.ENV_VAR))
    ids, period = lg.long_token_ids(model, lg.LONG_TEXT, N_TOKENS)
    return {method: lg.long_forward(model, ids, period, lg.LongSetting(method, FACTOR, 0.5, N_TOKENS))
            for method in lg.METHODS}


def long_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """The loss after the first copy for each RoPE, and each layer's weight on the first token."""
    try:
        runs = measured()
    except RuntimeError as error:  # ModelUnavailableError, ModelIntegrityError
        return Findings((), (), warning=_("SmolLM2's model file was not found on this server ({why}): this lesson "
                                          "needs it.").format(why=str(error).splitlines()[0]))
    loss = {method: run.mean_loss(run.period) for method, run in runs.items()}
    best = min(SCALINGS, key=loss.get)
    claims = (
        Claim(_("Inside the trained length the loss after the first copy is {inside} nats per token; with the later "
                "tokens moved so that the farthest pairs lie {factor}× the trained length apart, RoPE as trained "
                "gives {trained}.").format(inside=f"{loss['inside']:.2f}", factor=f"{FACTOR:g}",
                                           trained=f"{loss['trained']:.2f}"), loss["trained"] > loss["inside"] + 2),
        Claim(_("Of the three scalings, {best} keeps it lowest: {value}, against {linear} for position interpolation, "
                "which shrinks every distance, the neighbours' too.").format(
            best=_(lg.METHODS[best]), value=f"{loss[best]:.2f}", linear=f"{loss['linear']:.2f}"),
              loss[best] < loss["linear"] and best != "linear"),
        Claim(_("None gives back the loss inside the trained length ({inside}): the weights never saw these angles "
                "and were not fine-tuned on them.").format(inside=f"{loss['inside']:.2f}"),
              all(loss[m] > loss["inside"] + 0.3 for m in SCALINGS)),
    )
    table = pd.DataFrame({_("RoPE"): [_(lg.METHODS[m]) for m in runs],
                          _("loss after the first copy"): [loss[m] for m in runs],
                          _("first-token weight"): [float(runs[m].first.mean()) for m in runs]})
    first = np.stack([run.first.mean(axis=1) for run in runs.values()])  # (methods, L)
    figure = Heatmap(first, [_(HEATMAP_ROWS[m]) for m in runs], [str(n) for n in range(first.shape[1])],
                     _("weight on the first token, per layer (mean over heads)"), _("weight"), _("RoPE"), _("layer"))
    note = _("T = {t} tokens of the built-in text repeated; after the first copy every token moves so that the last "
             "sits at position {last}. On the Real model page, *Longer than trained* runs the same for other "
             "factors and lengths.").format(t=N_TOKENS, last=count(int(runs['trained'].positions[-1])))
    return Findings((figure,), claims, ((_("Mean loss per token after the first copy, nats."), table),), note=note)


LESSONS = (
    Lesson(
        key="long_context",
        title=N_("Past the trained length: which RoPE scaling keeps the loss lowest?"),
        short_title=N_("Longer than trained"),
        question=N_("SmolLM2 was trained on 8,192 positions. If its farthest tokens sit twice that far apart, which "
                    "scaling keeps the loss lowest: position interpolation, NTK-aware or YaRN? Predict first."),
        source=N_("position interpolation (Chen et al. 2023), NTK-aware scaling (bloc97 2023) and YaRN (Peng et al. "
                  "2023)"),
        source_url="https://arxiv.org/abs/2309.00071",
        panels=(LessonPanel(N_("RoPE on a toy sentence under a causal mask"),
                            replace(BASE, pe="rope", mask="causal")),),
        explanation=N_(
            "RoPE turns each pair of a query's and a key's features by an angle proportional to the position, fast "
            "pairs and slow ones. Past the trained length the slow pairs reach angles the model never saw. Position "
            "interpolation divides every angle by s: no angle is new, but neighbours look s times closer. NTK-aware "
            "scaling raises the base, so the slow pairs are interpolated and the fast ones almost untouched. YaRN "
            "interpolates only the pairs that turn less than once over the trained length, keeps those that turn "
            "more than 32 times, ramps between them, and sharpens the softmax a little."
        ),
        findings=long_findings,
    ),
)
