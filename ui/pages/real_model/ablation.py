"""Pure builders for "Turn heads off" (head ablation) on the Real model page's SmolLM2 view. No streamlit.

- the link: ``rm_off`` lists the heads turned off as layer.head joined by commas (``rm_off=5.4,11.0``),
  ``rm_off_mode`` says what replaces them (``zero``, the default, or ``mean``); bad entries are dropped
  with a message, the rest is kept;
- the next-token distribution before and after, as tables and in one sentence of numbers.

The numbers are ``mha_core.smollm2_ablation``'s; nothing here computes a model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from mha_core.minilm_ablation import EncoderAblation
from mha_core.smollm2 import SmolLM2
from mha_core.smollm2_ablation import ABLATIONS, Ablation, Head
from mha_core.smollm2_runs import softmax_1d
from ui.i18n import N_, _, ngettext, sentences
from ui.pages.real_model.smollm2 import shown_token
from ui.state.settings import Setting
from ui.state.urlstate import read_settings, write_settings

OFF_PARAM = "rm_off"
MAX_HEADS_OFF = 270  # every head of SmolLM2 (30 x 9): a link cannot ask for more
MODE_ROW = Setting("sm_off_mode", "choice", url="rm_off_mode", label=N_("Replace each turned-off head's output by"),
                   default="zero", choices=ABLATIONS, written="changed")
PAIR = re.compile(r"\s*(\d+)\.(\d+)\s*")
MODE_WORDS = {"zero": N_("zero"), "mean": N_("its mean over a reference text")}  # ABLATIONS' keys, in a sentence
MODE_LABELS = {"zero": N_("zero"), "mean": N_("mean over a reference text")}  # the switch's labels


def heads_from_link(params: Mapping[str, str], n_layers: int, n_heads: int,
                    messages: list[str]) -> tuple[Head, ...]:
    """The (layer, head) pairs of the link's ``rm_off``, sorted, once each; a message for every entry dropped."""
    raw = params.get(OFF_PARAM, "")
    heads: set[Head] = set()
    for piece in (p for p in raw.split(",") if p.strip()):
        match = PAIR.fullmatch(piece)
        if match is None:
            messages.append(_("`{param}`: '{piece}' is not layer.head (e.g. 5.4); it is left out.").format(
                param=OFF_PARAM, piece=piece.strip()))
            continue
        layer, head = int(match[1]), int(match[2])
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            messages.append(_("`{param}`: layer {layer}, head {head} does not exist (layers 0..{last_layer}, heads "
                              "0..{last_head}); it is left out.").format(
                param=OFF_PARAM, layer=layer, head=head, last_layer=n_layers - 1, last_head=n_heads - 1))
            continue
        heads.add((layer, head))
    return tuple(sorted(heads))[:MAX_HEADS_OFF]


def mode_from_link(params: Mapping[str, str], messages: list[str]) -> str:
    """The link's ``rm_off_mode`` (``zero`` when absent; a message and ``zero`` when it is not a mode)."""
    return read_settings(params, (MODE_ROW,), {}, messages)[MODE_ROW.name]


def ablation_params(heads: Iterable[Head], mode: str) -> dict[str, str]:
    """The query parameters that reopen this ablation (none for no head off; no mode for the default)."""
    heads = sorted(heads)
    if not heads:
        return {}
    return {OFF_PARAM: ",".join(f"{layer}.{head}" for layer, head in heads),
            **write_settings((MODE_ROW,), {MODE_ROW.name: mode})}


def head_index(head: Head, n_heads: int) -> int:
    """A (layer, head) pair as one whole number, the multiselect's option: layer * nh + head."""
    return head[0] * n_heads + head[1]


def head_of(index: int, n_heads: int) -> Head:
    """Inverse of ``head_index``."""
    return divmod(int(index), n_heads)


def top_frame(model: SmolLM2, ablation: Ablation, top_k: int, *, by: str) -> pd.DataFrame:
    """The ``top_k`` most likely next tokens ``by`` "before" (all heads) or "after" (heads off), with the
    probability of each token in both runs (temperature 1) and its change."""
    before, after = softmax_1d(ablation.clean_logits), softmax_1d(ablation.next_logits)  # (V,), (V,)
    order = np.argsort(-(before if by == "before" else after), kind="stable")[:top_k]  # (k,)
    return pd.DataFrame({
        "token": [shown_token(model.token_label(i)) for i in order],
        "before": before[order],
        "after": after[order],
        "change": after[order] - before[order],
        "id": order,
    }, index=pd.RangeIndex(1, len(order) + 1, name="rank"))


def rerun_sentence(n: int, mode: str, first_layer: int, n_layers: int) -> str:
    """How many heads are off, what replaced them, and which layers ran again."""
    parts = [ngettext("{n} head off, replaced by {mode}.", "{n} heads off, each replaced by {mode}.", n).format(
        n=n, mode=_(MODE_WORDS[mode]))]
    if first_layer > 0:
        parts.append(_("Layers {first}..{last} ran again; layers 0..{cached} came from the cache.").format(
            first=first_layer, last=n_layers - 1, cached=first_layer - 1))
    else:
        parts.append(_("All {layers} layers ran again.").format(layers=n_layers))
    return sentences(*parts)


def summary_sentence(model: SmolLM2, ablation: Ablation, n_layers: int) -> str:
    """What turning the heads off did to the next token, in numbers: heads, layers run again, top token, KL, loss."""
    before, after = int(np.argmax(ablation.clean_logits)), int(np.argmax(ablation.next_logits))
    parts = [rerun_sentence(len(ablation.heads), ablation.mode, ablation.first_layer, n_layers)]
    if before == after:
        parts.append(_("The top token stays '{token}'.").format(token=shown_token(model.token_label(before))))
    else:
        parts.append(_("The top token changes from '{before}' to '{after}'.").format(
            before=shown_token(model.token_label(before)), after=shown_token(model.token_label(after))))
    parts.append(_("KL(before ‖ after) = {kl} nats.").format(kl=f"{ablation.kl:.4f}"))
    if ablation.losses.size:
        parts.append(_("Loss on the prompt: {before} → {after} nats (mean over its {n} next tokens).").format(
            before=f"{ablation.clean_loss:.3f}", after=f"{ablation.loss:.3f}", n=ablation.losses.size))
    return sentences(*parts)


def encoder_summary(ablation: EncoderAblation, tokens, n_layers: int) -> str:
    """What turning MiniLM's heads off did: heads, layers run again, the sentence embedding's and the most moved
    token's cosine with the clean run."""
    moved = int(np.argmin(ablation.token_cosine))
    return sentences(
        rerun_sentence(len(ablation.heads), ablation.mode, ablation.first_layer, n_layers),
        _("Cosine similarity of the sentence embedding with the clean one: {cosine}.").format(
            cosine=f"{ablation.sentence_cosine:.4f}"),
        _("The piece that moved most is {position}:{token} (cosine {cosine}).").format(
            position=moved, token=tokens[moved], cosine=f"{ablation.token_cosine[moved]:.4f}"),
    )


def token_cosine_frame(tokens, cosines: np.ndarray) -> pd.DataFrame:
    """One row per word piece: the cosine of its final vector with the clean one's, and 1 minus it."""
    return pd.DataFrame({"piece": list(tokens), "cosine": np.asarray(cosines, dtype=np.float64),
                         "1 − cosine": 1.0 - np.asarray(cosines, dtype=np.float64)},
                        index=pd.RangeIndex(len(tokens), name="position"))
