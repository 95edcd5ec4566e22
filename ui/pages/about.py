"""The About page's builders: the glossary of shapes read from the engine's docstring."""

from __future__ import annotations

import re

from ui.i18n import N_

# The glossary's meanings as the engine's docstring writes them, marked for the catalogs (a docstring is not
# extracted); tests/test_i18n.py holds them equal to the docstring's, so an edit there fails until it is here too.
GLOSSARY_WORDS = (
    N_("number of tokens (Tq queries, Tk keys and values when they differ)"),
    N_("model width, d_model (C_q, C_k, C_v, C_out when the widths differ)"),
    N_("number of heads (query heads)"),
    N_("number of key/value heads (nh: multi-head, 1: multi-query, a divisor between: grouped-query)"),
    N_("head size of queries and keys, also called d_k (= C / nh in the app)"),
    N_("head size of values, d_v"),
    N_("tokens held in a decoder's key/value cache"),
    N_("rank of multi-head latent attention's latent (kv_lora_rank): numbers cached per token"),
    N_("decoupled RoPE features per head in multi-head latent attention"),
)


def glossary_rows(docstring: str) -> list[tuple[str, str]]:
    """(symbol, meaning) pairs from the indented 'Glossary of shapes' block of a docstring."""
    rows = []
    in_glossary = False
    for line in docstring.splitlines():
        if line.lower().startswith("glossary"):
            in_glossary = True
            continue
        if in_glossary:
            match = re.match(r"^\s{2,}(\S+)\s{2,}(.+)$", line)
            if match:
                rows.append((match.group(1), match.group(2).strip()))
            elif rows and line.strip():
                break
    return rows

