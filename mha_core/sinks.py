"""How much attention one key draws (an attention sink), as weight and as norm-weighted share.

Trained encoders park much of their weight on a few keys such as BERT's [CLS] and [SEP] (Clark et
al. 2019), whose values are short, so the weight moves the output little. Weighting each key by
the length of what it adds to the output, ||v_j W_O(h)|| (Kobayashi et al. 2020), shows that.
"""

from __future__ import annotations

import numpy as np

from mha_core.contributions import output_norm_weights


def norm_weighted_share(carried: np.ndarray, position: int) -> np.ndarray:
    """(nh,) the share of each row's carried mass that key ``position`` holds, averaged over the rows.

    ``carried (nh, Tq, Tk)`` is weight x ||v_j W_O(h)|| (``output_norm_weights``); a row that
    carries nothing counts as 0.
    """
    total = carried.sum(axis=-1)  # (nh, Tq)
    part = np.divide(carried[..., position], total, out=np.zeros_like(total), where=total > 0)  # (nh, Tq)
    return part.mean(axis=-1)  # (nh,)


def special_mass(traces, w_os, position: int) -> tuple[np.ndarray, np.ndarray]:
    """Per layer and head: the mean weight queries put on key ``position``, and its norm-weighted share.

    ``traces`` one AttentionTrace per layer, ``w_os`` each layer's W_O (C, C). Returns two (L, nh)
    arrays: the weight averaged over the queries, and ``norm_weighted_share``.
    """
    weight, share = [], []
    for trace, w_o in zip(traces, w_os, strict=True):
        carried = output_norm_weights(trace.weights, trace.values_per_query_head(), w_o)  # (nh, T, T)
        weight.append(trace.weights[..., position].mean(axis=-1))  # (nh,)
        share.append(norm_weighted_share(carried, position))  # (nh,)
    return np.array(weight), np.array(share)  # (L, nh) each
