"""The records a kernel's row is made of besides its function: what it refuses (``Refusal``), the maps it makes its
weights from in the pages' words (``WeightInputs``) and what it does to a head's A·V before the concatenation
(``RowScale``), and the words a row leaves out (``default_words``). Pure data; ``mha_core.kernels`` builds its
table ``KERNELS`` from them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from mha_core.marks import N_, Message


@dataclass(frozen=True)
class Refusal:
    """A setting a kernel cannot run with: when ``applies`` (read on a configuration, or anything with its
    attribute names), say ``reason`` and set ``fix`` (field -> value) to remove the conflict."""

    setting: str  # the configuration field it concerns
    reason: str
    applies: Callable[[object], bool]
    fix: Mapping[str, object]


@dataclass(frozen=True)
class WeightInputs:
    """The (nh, Tq, Tk) maps a kernel turns into its weights, in the words of every page that shows them.

    ``maps(logits, parts)`` takes a kernel's output (``KernelOutput.logits`` and ``.parts``, or a trace's
    ``logits`` and ``kernel_parts``) and returns one (nh, Tq, Tk) array per name of ``names``: the logits
    for softmax; L1 and L2, each half-head's scaled, masked logits, for differential; phi(q) . phi(k) for linear.
    """

    names: tuple[str, ...]  # one per map a head makes; ("",) for a single map
    maps: Callable[[np.ndarray, object], tuple[np.ndarray, ...]]
    label: str  # what the maps are: the switch's option, the CSV button
    short_label: str  # the same on a phone and in the presentation bar
    value_name: str  # one cell: the hover's and the colour bar's word
    caption: str  # under the figure
    file_stem: str  # the CSV's file name without .csv
    signed: bool = True  # centred on 0 (logits); False: from 0 up (a similarity, > 0)
    masked_is_neginf: bool = True  # masked cells are -inf in the maps; False: 0


SOFTMAX_INPUTS = WeightInputs(
    ("",), lambda logits, parts: (logits,), N_("scaled + masked logits"), N_("logits"), N_("scaled, masked logit"),
    N_("Colour = the score after scaling and masking, centred on 0 (red above, blue below). "
       "Grey cells are masked (−∞): the softmax gives them weight 0."), "logits")


@dataclass(frozen=True)
class RowScale:
    """What a kernel does to a head's A·V before the concatenation when that is more than A·V itself: it
    multiplies row i by one number c_i (so row i is still Σ_j c_i w_ij v_j: key j's exact share is c_i w_ij v_j).

    ``of(parts, heads)`` takes a trace's ``kernel_parts`` and ``heads (nh,Tq,hv)`` = A·V and returns c (nh,Tq);
    ``formula`` is c_i in words for captions.
    """

    of: Callable[[object, np.ndarray], np.ndarray]
    formula: str


def default_words(kernel) -> dict[str, object]:
    """The words a kernel's row leaves out ("" fields), made from its names: its weights' label, its weights step's
    title, formula and words; a kernel whose weights are one map of the logits (``weights_of``) also gets its
    logits view and its scale and mask steps in its own words (a softmax head's say "after the softmax")."""
    name = Message(kernel.short_label)  # the row's marked name, translated inside each sentence
    words = {"weights_label": Message(N_("weights ({name})"), name=name),
             "weights_title": Message(N_("{name} weights, entry by entry"), name=name).capitalised(),
             "weights_tex": rf"\text{{{kernel.formula}}}",
             "weights_why": Message(N_("{summary} Here {row_sums}."), summary=Message(kernel.summary),
                                    row_sums=Message(kernel.row_sums))}
    if kernel.weights_of is not None:
        words |= {
            "scale_why": Message(N_("The scores are multiplied by s before {name} turns them into weights: a dot "
                                    "product of d_k terms grows with d_k, and far from 0 {name} saturates."), name=name),
            "mask_why": Message(N_("a masked cell's logit becomes −∞, so {name} gives it weight exactly 0.")
                                if kernel.rows_sum_to_one else
                                N_("a masked cell's logit becomes −∞, so {name} gives it weight exactly 0; the other "
                                   "keys' weights stay as they were: nothing is shared out."), name=name),
        }
    made = {field: value for field, value in words.items() if not getattr(kernel, field)}
    if kernel.weights_of is not None and kernel.inputs is SOFTMAX_INPUTS:
        made["inputs"] = replace(SOFTMAX_INPUTS, caption=Message(N_(
            "Colour = the score after scaling and masking, centred on 0 (red above, blue below). Grey cells are "
            "masked (−∞): {name} gives them weight 0."), name=name))
    return made
