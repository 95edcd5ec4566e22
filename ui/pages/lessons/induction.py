"""Lesson 19, turn off the induction heads and watch the repeat fail: on SmolLM2, a random sequence repeated is
predicted well only in its second copy; turning off the heads that score as induction heads (``mha_core.head_roles``)
brings the second copy's loss back up, and turning off as many other heads of the same layers does not.

The numbers come from the real model (``mha_core.smollm2_ablation``, the Real model page's "Turn heads off"), the
same file the page uses, never downloaded here; where it is missing the lesson says so. Computed once per process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from mha_core.head_roles import THRESHOLD
from ui.charts.labels import axis_labels
from ui.i18n import N_, _
from ui.pages.lessons.records import BASE, Claim, Findings, Heatmap, Lesson, LessonPanel
from ui.pages.lessons.stored import measured_once

PROBE_HALF, PROBE_SEED = 24, 0  # as the Real model page's induction section and head roles


@dataclass(frozen=True)
class InductionAblation:
    """Mean loss (nats) on the first copy (tokens 1..n-1) and the second (n+1..2n-1) for each run."""

    heads: tuple[tuple[int, int], ...]  # the induction heads (score >= THRESHOLD), strongest first
    scores: tuple[float, ...]
    control: tuple[tuple[int, int], ...]  # as many other heads of the same layers, lowest induction scores
    losses: dict[str, tuple[float, float]]  # run -> (first copy, second copy)
    pattern: np.ndarray  # (2n, 2n) the strongest induction head on the probe
    labels: tuple[str, ...]


def copy_losses(losses: np.ndarray, half: int) -> tuple[float, float]:
    """Mean loss predicting tokens 1..n-1 (first copy) and n+1..2n-1 (second; token n follows nothing copyable)."""
    return float(losses[: half - 1].mean()), float(losses[half:].mean())


def control_heads(scores: np.ndarray, heads) -> tuple[tuple[int, int], ...]:
    """For each head, another head of its layer with the lowest induction score, each used once."""
    chosen: list[tuple[int, int]] = []
    for layer, _head in heads:
        others = [(float(scores[layer, h]), (layer, h)) for h in range(scores.shape[1])
                  if (layer, h) not in heads and (layer, h) not in chosen]
        chosen.append(min(others)[1])
    return tuple(chosen)


@measured_once
def measured() -> InductionAblation:
    """SmolLM2 on the probe with all heads, the strongest induction head off, all of them off, and the control off.
    The model is the Real model page's (``mha_core.models``: one copy per process); RuntimeError when its file is missing."""
    from mha_core import smollm2 as smol
    from mha_core.models import shared_smollm2
    from mha_core.smollm2_ablation import ablate

    model = shared_smollm2(os.environ.get(smol.ENV_VAR))
    probe = model.induction(half=PROBE_HALF, seed=PROBE_SEED)
    run = model.forward(probe.token_ids, traces=())
    order = [divmod(int(i), probe.induction.shape[1]) for i in np.argsort(-probe.induction, axis=None, kind="stable")]
    heads = tuple(h for h in order if probe.induction[h] >= THRESHOLD)
    control = control_heads(probe.induction, heads)
    losses = {"all": copy_losses(probe.loss, probe.half)}
    for name, off in (("top", heads[:1]), ("induction", heads), ("control", control)):
        losses[name] = copy_losses(ablate(model, run, off).losses, probe.half)
    top = heads[0]
    return InductionAblation(heads, tuple(float(probe.induction[h]) for h in heads), control, losses,
                             np.array(probe.attentions[top]), tuple(axis_labels(run.tokens)))


def induction_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """The losses per copy with and without the induction heads, and the strongest one's pattern."""
    try:
        numbers = measured()
    except RuntimeError as error:  # ModelUnavailableError, ModelIntegrityError
        return Findings((), (), warning=_("SmolLM2's model file was not found on this server ({why}): this lesson "
                                          "needs it.").format(why=str(error).splitlines()[0]))
    first, second = numbers.losses["all"]
    top_first, top_second = numbers.losses["top"]
    off_first, off_second = numbers.losses["induction"]
    control_second = numbers.losses["control"][1]
    (layer, head), k = numbers.heads[0], len(numbers.heads)
    claims = (
        Claim(_("On {n} random tokens repeated, SmolLM2's loss is {first} nats per token in the first copy and {second} "
                "in the second: nothing in the first copy is predictable, the second is copied.").format(
            n=PROBE_HALF, first=f"{first:.2f}", second=f"{second:.2f}"), second < first - 3),
        Claim(_("{k} heads score at least {threshold} as induction heads; the strongest is layer {layer}, head {head} "
                "({score}). Turning off only that one raises the second copy's loss to {one}: other heads still "
                "copy.").format(k=k, threshold=THRESHOLD, layer=layer, head=head, score=f"{numbers.scores[0]:.2f}",
                                one=f"{top_second:.2f}"), second < top_second < off_second),
        Claim(_("Turning off all {k} raises it to {off}, close to the first copy's {first}: the repeat fails. The "
                "first copy's loss stays {off_first}.").format(k=k, off=f"{off_second:.2f}", first=f"{first:.2f}",
                                                              off_first=f"{off_first:.2f}"),
              off_second > second + 0.5 * (first - second) and abs(off_first - first) < 1.0),
        Claim(_("Control: turning off {k} other heads of the same layers (those with the lowest induction scores) "
                "raises it only to {control}.").format(k=k, control=f"{control_second:.2f}"),
              control_second - second < (off_second - second) / 3),
    )
    rows = ((_("every head"), first, second), (_("the strongest induction head off"), top_first, top_second),
            (_("all {k} induction heads off").format(k=k), off_first, off_second),
            (_("{k} other heads of the same layers off").format(k=k), *numbers.losses["control"]))
    table = pd.DataFrame({_("run"): [r[0] for r in rows], _("first copy (nats)"): [r[1] for r in rows],
                          _("second copy (nats)"): [r[2] for r in rows]})
    heads_text = ",".join(f"{lay}.{h}" for lay, h in numbers.heads)  # as the link writes them
    labels = list(numbers.labels)
    figure = Heatmap(numbers.pattern, labels, labels, _("layer {layer}, head {head}").format(layer=layer, head=head),
                     _("weight"), _("query"), _("key"), allowed=np.tri(len(labels), dtype=bool))
    note = _("The strongest induction head on the probe: in the second copy, the stripe one column right of the "
             "off-diagonal is each token looking at what followed it last time. On the Real model page, *Turn heads "
             "off* does the same for any prompt; these heads are `rm_off={heads}`.").format(heads=heads_text)
    return Findings((figure,), claims, ((_("Mean loss per token on each copy of the probe."), table),), note=note)


LESSONS = (
    Lesson(
        key="induction_ablation",
        title=N_("Turn off the induction heads and watch the repeat fail"),
        short_title=N_("Induction heads off"),
        question=N_("An induction head looks at the token after the earlier copy. If I turn those heads off, does the "
                    "model really stop copying, or do other heads take over?"),
        source=N_("the induction-head probe of Olsson et al. (2022)"),
        source_url="https://transformer-circuits.pub/2022/in-context-learning-and-induction-heads/index.html",
        panels=(LessonPanel(N_("A toy repeat under a causal mask"),
                            replace(BASE, tokens=("the", "cat", "sat", "the", "cat", "sat"), mask="causal")),),
        explanation=N_(
            "A repeated random sequence can only be predicted by copying: having seen A B, at the next A predict B. "
            "Heads that do this attend from each token of the second copy to the token after its earlier "
            "occurrence. Turning them off (their output set to 0 before W_O) takes the copying away, and the second "
            "copy becomes as hard as the first. Turning off as many other heads of the same layers barely matters: "
            "the effect belongs to these heads, not to removing heads at all."
        ),
        findings=induction_findings,
    ),
)
