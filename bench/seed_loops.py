"""The seeds' algorithms, rewritten for timing: attention computed one head at a time in a loop.

These are our own re-implementations of what seed 002 and seed 003 compute, kept as slow as
their algorithms are (a Python loop over heads, one small matmul chain per head) but without
their prints and return-type changes, so that the benchmark times the algorithm. The engine
never looks like this; ``bench_seeds`` checks both against ``mha_core`` before timing them.
"""

from __future__ import annotations

import numpy as np


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    """Softmax of every row, the maximum subtracted first (seed 002's nested helper)."""
    e = np.exp(logits - logits.max(axis=1, keepdims=True))  # (T, T)
    return e / e.sum(axis=1, keepdims=True)  # (T, T)


def softmax_columns(logits: np.ndarray) -> np.ndarray:
    """Softmax of every column, the maximum subtracted first (seed 003's column convention)."""
    e = np.exp(logits - logits.max(axis=0, keepdims=True))  # (Tk, Tq)
    return e / e.sum(axis=0, keepdims=True)  # (Tk, Tq)


def seed002_attention(x: np.ndarray, w_q: np.ndarray, w_k: np.ndarray, w_v: np.ndarray, n_heads: int) -> np.ndarray:
    """Seed 002: project once, then loop over the heads' column blocks; no output projection.

    x (T, C); w_q, w_k, w_v (C, C); returns the concatenated heads (T, C).
    """
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # (T, C) each
    size = q.shape[1] // n_heads
    heads = []
    for head in range(n_heads):
        columns = slice(head * size, (head + 1) * size)
        logits = q[:, columns] @ k[:, columns].T / np.sqrt(size)  # (T, T)
        heads.append(softmax_rows(logits) @ v[:, columns])  # (T, hs)
    return np.concatenate(heads, axis=1)  # (T, C)


def seed003_attention(x_columns: np.ndarray, per_head: list[tuple[np.ndarray, ...]], omega_c: np.ndarray) -> np.ndarray:
    """Seed 003: tokens are columns; every head has its own weights and biases; output projection.

    x_columns (C, T); per_head: one (omega_q, omega_k, omega_v, beta_q, beta_k, beta_v) per head,
    omegas (hs, C) and betas (hs, 1); omega_c (C_out, nh*hs). Returns (C_out, T).
    """
    outputs = []
    for omega_q, omega_k, omega_v, beta_q, beta_k, beta_v in per_head:
        q = omega_q @ x_columns + beta_q  # (hs, T)
        k = omega_k @ x_columns + beta_k  # (hs, T)
        v = omega_v @ x_columns + beta_v  # (hs, T)
        logits = (k.T @ q) * (1.0 / np.sqrt(q.shape[0]))  # (Tk, Tq): entry [m, n] = k_m . q_n
        outputs.append(v @ softmax_columns(logits))  # (hs, Tq)
    return omega_c @ np.vstack(outputs)  # (C_out, Tq)
