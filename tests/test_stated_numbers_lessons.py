"""Every number a lesson's sentence states, recomputed here from the engine value it names (issue 32, item 8).

``test_lessons.py`` checks each claim's ``holds`` flag, which the lesson computes beside its sentence: a sentence
that printed another variable than the one it names would still pass there. Here each sentence is read back
(``tests/stated_numbers.py``: numbers in order, to their printed precision) and compared with numbers computed from
``run(config)`` of the lesson's own panels, by a path of this file (never the lesson's findings function). Where a
sentence names a row, a head or a key, the name is read from the sentence and the number recomputed for it. The
tables printed beside a lesson's charts are compared with the engine the same way, row by row.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from stated_numbers import TINY, assert_states, ints_after, rope_turned, softmax_row
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from mha_core.decoder import decoder_config
from ui.charts.marks import FAILS, HOLDS
from ui.pages.lessons import LESSONS

ROOT = Path(__file__).resolve().parents[1]
MARKS = (f"- {HOLDS} ", f"- {FAILS} ")


class Shown:
    """What the Lessons page shows for one lesson: its claim sentences and the tables beside its charts."""

    def __init__(self, key: str):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.switch_page("app_pages/lessons.py")
        at.query_params["lesson"] = key
        at.run()
        assert not at.exception, at.exception
        lines = [line for m in at.markdown for line in m.value.splitlines()]
        self.claims = [line[len(MARK):] for line in lines for MARK in MARKS if line.startswith(MARK)]
        assert self.claims, f"lesson {key} shows no claim"
        self.captions = [c.value for c in at.caption]
        self.tables = [frame.value for frame in at.dataframe]


@pytest.fixture(scope="module")
def findings():
    """Lesson key -> what its page shows (one page run per lesson, kept for the module)."""
    cache = {}

    def of(key: str) -> Shown:
        if key not in cache:
            cache[key] = Shown(key)
        return cache[key]

    return of


def claims(findings, key: str) -> list[str]:
    return findings(key).claims


def configs(key: str) -> list[MHAConfig]:
    return [p.config for p in LESSONS[key].panels]


def contributions(result) -> np.ndarray:
    """(nh, Tq, C_out): head h's output times its rows of W_O (the identity without W_O)."""
    heads = result.trace.heads  # (nh, Tq, hv)
    nh, _, hv = heads.shape
    w_o = result.weights.w_o if result.weights.w_o is not None else np.eye(nh * hv)
    return np.stack([heads[h] @ w_o[h * hv : (h + 1) * hv] for h in range(nh)])


def label_index(labels: list[str], text: str, before: str) -> int:
    """The position of the token label the sentence names after ``before`` ('row `3:on`' -> 3), checked."""
    found = re.search(rf"{before}\s+`?(\d+):([^\s`,.:]+)", text)
    assert found, (before, text)
    i = int(found.group(1))
    assert labels[i] == f"{i}:{found.group(2)}", (labels, text)
    return i


def test_wo_shares_are_each_heads_norm_of_its_contribution_to_a_column(findings):
    without, with_wo = (run(c) for c in configs("wo"))
    size = np.linalg.norm(contributions(with_wo), axis=1)  # (nh, C)
    shares = size / size.sum(axis=0)
    first, second, third = claims(findings, "wo")
    assert_states(first, [TINY])
    assert np.abs(without.trace.output - without.trace.concat).max() == 0
    assert_states(second, [with_wo.config.n_heads, 100 * shares.min(), 100 * shares.max()])
    assert_states(third, [TINY])


def test_causal_row_keeps_the_unmasked_weight_of_keys_0_to_i(findings):
    free, causal = (run(c) for c in configs("causal"))
    first, second = claims(findings, "causal")
    w = causal.trace.weights[0]
    assert np.triu(w, 1).max() == 0
    assert_states(first, [TINY, 1, TINY])
    i = label_index(free.query_labels, second, "row")
    kept = free.trace.weights[0, i, : i + 1].sum()
    assert_states(second, [i, kept, TINY])
    # The row table beside the chart: row i of both heads' weights, and the kept mass dividing it.
    table = findings("causal").tables[0]
    assert any(free.query_labels[i] in c for c in findings("causal").captions)
    np.testing.assert_allclose(table["weight without mask"].to_numpy(), free.trace.weights[0, i], atol=1e-12)
    np.testing.assert_allclose(table["weight with causal mask"].to_numpy(), w[i], atol=1e-12)
    assert list(table["key"]) == free.key_labels


def test_colours_brightest_head_and_output_shares(findings):
    (config,) = configs("colours")
    result = run(config)
    weights = result.trace.weights
    brightness = weights.max(axis=-1).mean(axis=-1)  # (nh,) mean row maximum
    c = contributions(result)
    size = np.linalg.norm(c.reshape(c.shape[0], -1), axis=1)
    shares = size / size.sum()
    first, second = claims(findings, "colours")
    assert_states(first, [1, TINY])
    named = ints_after(second, "head")
    assert named == [int(np.argmax(brightness)), int(np.argmax(shares))], second
    b, s = named
    assert_states(second, [b, brightness[b], 100 * shares[b], s, 100 * shares[s]])
    table = findings("colours").tables[0]
    np.testing.assert_allclose(table["mean row maximum"].to_numpy(), brightness, atol=1e-12)
    np.testing.assert_allclose(table["brightest cell"].to_numpy(), weights.max(axis=(1, 2)), atol=1e-12)
    np.testing.assert_allclose(table["share of the output (%)"].to_numpy(), 100 * shares, atol=1e-9)


def test_average_is_flatter_and_matches_few_rows(findings):
    (config,) = configs("average")
    weights = run(config).trace.weights
    average = weights.mean(axis=0)
    per_head = weights.max(axis=-1).mean(axis=-1)
    agree = (weights.argmax(-1) == average.argmax(-1)).sum(-1)
    first, second = claims(findings, "average")
    assert_states(first, [average.max(-1).mean(), per_head.min(), per_head.max()])
    assert_states(second, [agree.min(), agree.max(), len(config.tokens)])
    table = findings("average").tables[0]
    np.testing.assert_allclose(table["mean row maximum"].to_numpy(), [*per_head, average.max(-1).mean()], atol=1e-12)
    column = table.columns[2]
    assert list(table[column])[:-1] == [f"{a} of {len(config.tokens)}" for a in agree]


def test_rope_offset_scores_range(findings):
    (config,) = configs("rope")
    trace = run(config).trace
    q, k = trace.q_unrotated[0, 0], trace.k_unrotated[0, 1]
    table = findings("rope").tables[0]
    n = table.shape[0]
    scores = np.array([[rope_turned(q, p, config.rope_base) @ rope_turned(k, r, config.rope_base) for r in range(n)]
                       for p in range(n)])
    np.testing.assert_allclose(table.to_numpy(), scores, atol=1e-12)  # rows: the query's position, columns: the key's
    by_offset = scores[:, 0]
    *_, third = claims(findings, "rope")
    assert_states(third, [by_offset.min(), by_offset.max(), 0, n - 1])


def test_alibi_slopes_and_mean_distances(findings):
    (config,) = configs("alibi")
    nh, t = config.n_heads, len(config.tokens)
    alibi = run(config).trace
    plain = run(MHAConfig(**{**config.__dict__, "pe": "none"})).trace
    distance = np.abs(np.arange(t)[:, None] - np.arange(t)[None, :])
    slopes = -alibi.bias[:, 1, 0]  # the engine's penalty one token away
    near = (alibi.weights * distance).sum(-1).mean(-1)
    far = (plain.weights * distance).sum(-1).mean(-1)
    first, second, third = claims(findings, "alibi")
    assert_states(first, [*slopes, TINY])
    assert_states(second, [v for pair in zip(near, far, strict=True) for v in pair])
    assert_states(third, [2 * t, t, t, TINY])
    table = findings("alibi").tables[0]
    np.testing.assert_allclose(table.to_numpy(), np.stack([slopes, near, far], axis=1), atol=1e-12)
    assert nh == len(table)


def test_gqa_cache_sizes_and_weight_difference(findings):
    grouped, single = (run(c) for c in configs("gqa"))
    nh = grouped.config.n_heads
    differ = np.abs(grouped.trace.weights[0] - grouped.trace.weights[1]).max()
    t, hs = len(grouped.config.tokens), grouped.config.head_size
    sizes = [2 * kv * t * hs for kv in (nh, grouped.config.key_value_heads, 1)]
    first, second, third = claims(findings, "gqa")
    assert_states(first, [0, 1, 0, 1, TINY])
    assert_states(second, [differ])
    assert_states(third, [sizes[0], nh, sizes[1], grouped.config.key_value_heads, sizes[2], 1])
    table = findings("gqa").tables[0]
    assert list(table["cache numbers"]) == sizes
    assert list(table["cache bytes (float64)"]) == [8 * s for s in sizes]


def test_kv_cache_fresh_cached_and_flops(findings):
    (config,) = configs("kv_cache")
    result = run(decoder_config(config))
    nh, kv, hs = config.n_heads, config.key_value_heads, config.head_size
    t = len(config.tokens)
    fresh = nh * hs + 2 * kv * hs
    per_token = 2 * kv * hs
    flops = 2 * nh * t * (2 * hs)  # the last row: q·k and A·V over t keys for every head
    cache_bytes = 8 * per_token * t
    first, second, third = claims(findings, "kv_cache")
    assert_states(first, [TINY])
    assert_states(second, [fresh, per_token])
    assert_states(third, [flops, cache_bytes, flops / cache_bytes, t, t * flops / cache_bytes])
    table = findings("kv_cache").tables[0]
    assert list(table["cache numbers"]) == [per_token * (s + 1) for s in range(t)]
    assert list(table["fresh numbers"]) == [fresh] * t
    assert list(table["reused from cache"]) == [per_token * s for s in range(t)]
    assert list(table["cache bytes as MHA"]) == [8 * 2 * nh * hs * (s + 1) for s in range(t)]
    assert list(table["token"]) == result.query_labels


def test_differential_sums_and_negative_weights(findings):
    _, diff = (run(c) for c in configs("differential"))
    parts, weights = diff.trace.kernel_parts, diff.trace.weights
    lam = float(parts.lam)
    before = softmax_row(parts.logits1 - lam * np.where(np.isinf(parts.logits2), 0.0, parts.logits2))
    sums_gap = np.abs(weights.sum(-1) - (1 - lam)).max()
    visible = int(diff.mask.sum()) * weights.shape[0]
    first, second, third, fourth = claims(findings, "differential")
    assert_states(first, [TINY])
    assert_states(second, [np.abs(before - weights).max()])
    assert_states(third, [1 - lam, 1, TINY])
    assert sums_gap <= 1e-12
    assert_states(fourth, [int((weights < 0).sum()), visible, weights.min()])


def test_mla_cache_numbers(findings):
    mha, mla = configs("mla_cache")
    nh, hs, t = mha.n_heads, mha.head_size, len(mha.tokens)
    per_token = mla.mla_rank + mla.mla_rope
    first, second, third, fourth = claims(findings, "mla_cache")
    assert_states(first, [mla.mla_rank, mla.mla_rope, per_token, nh, 2, nh, hs, 2 * nh * hs])
    assert_states(second, [TINY])
    assert_states(third, [TINY])
    assert_states(fourth, [t, 2 * nh * hs * t, 2 * hs * t, per_token * t])


def test_linear_state_size_and_flatter_rows(findings):
    plain, linear = (run(c) for c in configs("linear_state"))
    nh, hs, t = linear.config.n_heads, linear.config.head_size, len(linear.config.tokens)
    state = nh * (hs * hs + hs)  # S (hs × hv, hv = hs) and z (hs) per head
    first, second, third = claims(findings, "linear_state")
    long_t = [n for n in ints_after(first, "after")][-1]
    assert_states(first, [state, 1, state, t, state, long_t, 2 * nh * hs * t, t, 2 * nh * hs * long_t, long_t])
    assert_states(second, [TINY])
    assert_states(third, [1, TINY, linear.trace.weights.max(-1).mean(), plain.trace.weights.max(-1).mean()])


def test_online_softmax_rescale_of_the_named_row_and_key(findings):
    (config,) = configs("online_softmax")
    result = run(config)
    labels = result.key_labels
    first, second, third = claims(findings, "online_softmax")
    row = label_index(result.query_labels, first, "Row")
    key = label_index(labels, first, "key")
    logits = result.trace.logits[0, row]
    old, new = logits[:key].max(), logits[: key + 1].max()  # one key per tile: the running maximum
    assert new > old
    assert_states(first, [row, key, old, new, old, new, np.exp(old - new), 1])
    weights = np.exp(logits[: key + 1] - new)
    share = weights[:key].sum() / weights.sum()  # what the keys seen before keep of the row
    assert_states(second, [share, 1 - share, TINY])
    assert_states(third, [TINY, TINY])


def test_never_stored_counts(findings):
    (config,) = configs("never_stored")
    t, hv = len(config.tokens), config.head_size
    first, second, third = claims(findings, "never_stored")
    assert_states(first, [t * hv + t, t, hv, t * t, t])
    table = findings("never_stored").tables[0]
    assert list(table["weights to return (T²)"]) == [n * n for n in table["tokens T"]]
    last = table.iloc[-1]
    assert_states(second, [last["tokens T"], last["standard: HBM numbers"], last["tiled: HBM numbers"],
                           last["standard: HBM numbers"] / last["tiled: HBM numbers"]])
    assert_states(third, [TINY])


def test_causal_skip_tiles_above_the_diagonal(findings):
    (config,) = configs("causal_skip")
    t = len(config.tokens)
    n = -(-t // 2)
    above = [(i, j) for i in range(n) for j in range(n) if j > i]
    first, second, third = claims(findings, "causal_skip")
    assert_states(first, [t, 2, 2, len(above), *[x for pair in above for x in pair]])
    table = findings("causal_skip").tables[0]
    for _, row in table.iterrows():  # 64 causal tokens in square tiles of b: the tiles wholly above the diagonal
        blocks = -(-64 // int(row["B_r = B_c"]))
        assert row["tiles"] == blocks * blocks
        assert row["skipped"] == blocks * (blocks - 1) // 2
    shares = 100 * table["skipped"] / table["tiles"]
    assert_states(second, [64, shares.iloc[0], table["B_r = B_c"].iloc[0], shares.iloc[-1], 1])
    assert_states(third, [TINY])


def window_output(result, window: int, sinks: int) -> np.ndarray:
    """(T, C_out) the decoder's output when step t attends only to its last ``window`` keys and the first ``sinks``
    (positions as the tokens stood: the cached logits are full attention's), written out here."""
    trace, t = result.trace, len(result.query_labels)
    rows = []
    for i in range(t):
        kept = sorted(set(range(max(0, i - window + 1), i + 1)) | set(range(min(sinks, i + 1))))
        heads = []
        for h in range(trace.n_heads):
            w = softmax_row(trace.logits[h, i, kept][None])[0]
            heads.append(w @ trace.v[trace.kv_head_of(h), kept])
        concat = np.concatenate(heads)
        out = concat @ result.weights.w_o if result.weights.w_o is not None else concat
        rows.append(out + (0 if result.weights.b_o is None else result.weights.b_o))
    return np.stack(rows)


def test_sinks_changes_by_window_and_with_one_sink(findings):
    sink_head, random_head = configs("sinks")
    window = 3
    first, second, third, fourth = claims(findings, "sinks")
    changes = []
    for config in (sink_head, random_head):
        result = run(decoder_config(config))
        full = result.trace.output
        changes.append([np.linalg.norm(window_output(result, window, s) - full) / np.linalg.norm(full) for s in (0, 1)])
    on_first = run(decoder_config(sink_head)).trace.weights[:, window:, 0].mean()
    assert_states(first, [100 * on_first])
    assert_states(second, [window, 100 * changes[0][0]])
    assert changes[0][1] <= 1e-6
    assert_states(third, [1, TINY])
    assert_states(fourth, [0, 100 * changes[1][0], 100 * changes[1][1]])


def test_saturation_table_and_ranges_are_averages_over_the_seeds(findings):
    table = findings("saturation").tables[0]
    widths = [int(d) for d in table["d_model"]]
    rows = []
    for d_model in widths:
        row = []
        for init in ("xavier", "uniform"):
            maxima, same = [], []
            for seed in range(10):
                w = run(MHAConfig(tokens=LESSONS["saturation"].panels[0].config.tokens, d_model=d_model, n_heads=4,
                                  seed=seed, init=init)).trace.weights
                maxima.append(w.max(-1).mean())
                choice = w.argmax(-1)
                same.append((choice == choice[0]).all(axis=0).mean())
            row.append((np.mean(maxima), 100 * np.mean(same)))
        rows.append([row[0][0], row[1][0], row[0][1], row[1][1]])
    expected = np.array(rows)  # (widths, 4): row max Xavier, uniform; agree Xavier, uniform
    np.testing.assert_allclose(table.iloc[:, 1:].to_numpy(dtype=float), expected, atol=1e-12)
    first, second = claims(findings, "saturation")
    x_max, u_max, x_same, u_same = expected.T
    assert_states(first, [widths[0], widths[-1], 0, 1, u_max.min(), u_max.max(), x_max.min(), x_max.max(), 1 / 6])
    assert_states(second, [4, u_same.min(), u_same.max(), x_same.min(), x_same.max()])


def test_sqrt_dk_table_and_claims_are_averages_over_the_seeds(findings):
    table = findings("sqrt_dk").tables[0]
    sizes = [int(d) for d in table["d_k"]]
    rows = []
    for d_k in sizes:
        numbers = []
        for seed in range(10):
            trace = run(MHAConfig(tokens=LESSONS["sqrt_dk"].panels[0].config.tokens, d_model=d_k, n_heads=1,
                                  seed=seed)).trace
            raw, scaled = trace.scores[0], trace.scores[0] / np.sqrt(d_k)
            numbers.append([raw.std(-1).mean(), scaled.std(-1).mean(), softmax_row(raw).max(-1).mean(),
                            softmax_row(scaled).max(-1).mean()])
        rows.append([np.sqrt(d_k), *np.mean(numbers, axis=0)])
    expected = np.array(rows)
    np.testing.assert_allclose(table.iloc[:, 1:].to_numpy(dtype=float), expected, atol=1e-12)
    first, second = claims(findings, "sqrt_dk")
    _, raw_spread, scaled_spread, raw_max, scaled_max = expected.T
    assert_states(first, [sizes[0], sizes[-1], raw_spread[-1] / raw_spread[0], sizes[-1] // sizes[0],
                          np.sqrt(sizes[-1] / sizes[0]), scaled_spread.min(), scaled_spread.max()])
    assert_states(second, [raw_max[0], raw_max[-1], scaled_max.mean()])


# ---- lesson 18, tokens across scripts: counts from the real tokenizers, loaded here by the models' own loaders ----


def token_counts(text: str, smollm2, model) -> dict[str, int]:
    """What the lesson should state for ``text``: recounted from the models' tokenizers (conftest's fixtures load the
    whole models, not the lesson's tokenizer-only path). A character is cut when no token's bytes decode to it whole:
    a lone piece of a UTF-8 sequence never decodes, so ``errors="ignore"`` keeps exactly the whole characters."""
    from mha_core.bpe import token_bytes

    pieces = [token_bytes(smollm2.vocabulary[i]) for i in smollm2.tokenizer.encode(text).ids]
    words = model.tokenize(text)[1:-1]  # [CLS] ... [SEP]
    whole = sum(len(piece.decode("utf-8", errors="ignore")) for piece in pieces)
    assert b"".join(pieces) == text.encode("utf-8")  # the pieces are the text's bytes, in order
    return {"chars": len(text), "bytes": len(text.encode("utf-8")), "smollm2": len(pieces), "cut": len(text) - whole,
            "minilm": len(words), "unk": words.count("[UNK]")}


def test_tokens_lesson_states_the_tokenizers_counts(findings, smollm2, model):
    from ui.pages.lessons.tokens import CHINESE, ENGLISH, SENTENCES, SPANISH

    counted = [token_counts(row[lang], smollm2, model) for row in SENTENCES for lang in (ENGLISH, CHINESE, SPANISH)]
    en, zh, es = counted[:3]
    en_total, zh_total = sum(c["smollm2"] for c in counted[0::3]), sum(c["smollm2"] for c in counted[1::3])
    shown = findings("tokens")
    by_bytes, smol_first, smol_total, cut, minilm_zh, minilm_es = shown.claims
    assert_states(by_bytes, [zh["chars"], zh["bytes"], zh["bytes"] / zh["chars"], en["bytes"]])
    assert_states(smol_first, [en["smollm2"], zh["smollm2"], zh["chars"], en["chars"]])
    assert_states(smol_total, [len(SENTENCES), zh_total, en_total, zh_total / en_total])
    assert_states(cut, [zh["cut"], zh["chars"]])
    assert_states(minilm_zh, [zh["minilm"], zh["chars"], zh["unk"]])
    assert_states(minilm_es, [es["unk"], es["minilm"]])
    assert zh_total > 2 * en_total and zh["unk"] > 0  # the lesson's point, on these sentences
    counts = shown.tables[0]
    columns = ["characters", "UTF-8 bytes", "SmolLM2 tokens", "characters cut into byte pieces", "MiniLM pieces",
               "[UNK] pieces"]
    keys = ["chars", "bytes", "smollm2", "cut", "minilm", "unk"]
    assert counts[columns].to_numpy().tolist() == [[c[k] for k in keys] for c in counted]


def piece_bytes(piece: str) -> bytes:
    """The bytes a shown SmolLM2 piece stands for: ␣ a space, 'X‹e7 8c›' the bytes e7 8c of X, else the text."""
    out, rest = b"", piece
    while rest:
        if len(rest) > 1 and rest[1] == "‹":
            held, rest = rest[2:].split("›", 1)
            out += bytes.fromhex(held)
        else:
            out += b" " if rest[0] == "␣" else rest[0].encode("utf-8")
            rest = rest[1:]
    return out


def test_tokens_lesson_pieces_round_trip_to_each_sentence(findings, smollm2, model):
    from ui.pages.lessons.tokens import CHINESE, ENGLISH, SENTENCES, SPANISH

    texts = [row[lang] for row in SENTENCES for lang in (ENGLISH, CHINESE, SPANISH)]
    pieces = findings("tokens").tables[1]
    for text, smol, words in zip(texts, pieces["SmolLM2 pieces"], pieces["MiniLM word pieces"], strict=True):
        shown = smol.split(" | ")
        assert b"".join(piece_bytes(p) for p in shown) == text.encode("utf-8"), (text, smol)
        assert len(shown) == len(smollm2.tokenizer.encode(text).ids)
        assert words.split(" | ") == model.tokenize(text)[1:-1]
    assert "猫‹" in pieces["SmolLM2 pieces"].iloc[1]  # a character cut between tokens is shown with its bytes
