"""The five seed documents as named examples that our engine reproduces.

Each seed (``../shared/seeds/000..004``) wrote multi-head attention its own way: rows or
columns, fused or per-head matrices, its own scale and randomness. A ``SeedExample`` records
those conventions as data, rebuilds the seed's inputs with small builder functions, runs
*our* ``multi_head_attention`` on them and keeps the numbers the seed printed beside ours.
``compare(case)`` puts the two side by side. The app's "Seed notebooks" page and
``tests/test_examples.py`` both read ``SEED_EXAMPLES``.

Where a seed printed numbers from fixed inputs or seeded randomness (001, 002, 003) our
numbers must equal them to the printed precision. Where it drew unseeded random numbers
(000, 004) nothing it printed can be reproduced: we draw from ``np.random.default_rng`` with
a fixed seed and check the structure instead.

Seeds 002 and 003 seeded NumPy's legacy global generator; to rebuild their exact inputs we
replay their draws, in their order, on ``np.random.RandomState`` with the same seed. That is
the only place legacy randomness is used: everything new draws from ``default_rng``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from mha_core.attention import AttentionWeights, multi_head_attention
from mha_core.config import MHAConfig
from mha_core.inputs import init_matrix
from mha_core.marks import N_
from mha_core.masks import padding_mask

EXAMPLE_SEED = 0  # default_rng seed standing in for the unseeded draws of seeds 000 and 004
# Checks whose words hold numbers: the key is the template filled in (English); the page translates the template.
SHAPE_CHECK = N_("{name} has shape {shape}")
RANGE_CHECK = N_("mean of output[0, 0] lies within the seed's printed range {low}..{high}")
ROW_SUM_TOL = 1e-9  # |sum of a weight row - 1| allowed in the structural checks (float64)
PRINT_SLACK = 1.001  # tolerance = half a unit of the last printed decimal, times this


@dataclass(frozen=True)
class SeedCase:
    """One computation of a seed: how to run it on our engine and what the seed printed."""

    name: str
    description: str
    compute: Callable[[], dict[str, np.ndarray]]  # runs our engine on the seed's inputs; named arrays
    printed: dict[str, np.ndarray] | None  # what the seed printed, by the same names; None = not reproducible
    decimals: int | None  # decimals the seed printed with
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # shapes the seed's code gives
    extra_checks: Callable[[dict[str, np.ndarray]], dict[str, bool]] | None = None  # seed-specific checks


@dataclass(frozen=True)
class SeedExample:
    """One seed document: its conventions, its computations, and where it fits in the explorer."""

    key: str
    title: str
    source_file: str
    summary: str
    conventions: dict[str, str]
    reproducible: bool  # False when the seed used unseeded randomness
    note: str  # English, marked N_ (translated where shown); "{seed}" in it stands for EXAMPLE_SEED
    cases: tuple[SeedCase, ...]
    explorer: MHAConfig | None  # the closest explorer configuration, or None when none fits


@dataclass(frozen=True)
class CaseComparison:
    """Our numbers beside the seed's, with the largest difference and the structural checks."""

    name: str
    ours: dict[str, np.ndarray]
    printed: dict[str, np.ndarray] | None
    max_abs_diff: dict[str, float]  # per printed name; inf when the shapes differ
    tolerance: float | None  # None when nothing was printed
    matches: bool | None  # every printed name within tolerance; None when nothing was printed
    checks: dict[str, bool]  # structural checks by description


# ---------------------------------------------------------------------------------------------
# Shared builders
# ---------------------------------------------------------------------------------------------


def printed_tolerance(decimals: int) -> float:
    """Half a unit of the last printed decimal (plus a hair for float rounding)."""
    return 0.5 * 10.0**-decimals * PRINT_SLACK


def _run_batch(
    x_q: np.ndarray, x_k: np.ndarray, x_v: np.ndarray, weights: AttentionWeights, n_heads: int, masks=None
) -> dict[str, np.ndarray]:
    """Our engine is unbatched: run it once per sequence and stack the results."""
    traces = [
        multi_head_attention(
            x_q[b], weights, n_heads, x_k=x_k[b], x_v=x_v[b], mask=None if masks is None else masks[b]
        )
        for b in range(x_q.shape[0])
    ]
    out = {
        "weights": np.stack([t.weights for t in traces]),  # (B, nh, Tq, Tk)
        "output": np.stack([t.output for t in traces]),  # (B, Tq, C_out)
        "fully_masked": np.stack([t.fully_masked for t in traces]),  # (B, nh, Tq)
    }
    if masks is not None:
        out["mask"] = np.asarray(masks)  # (B, Tq, Tk), True = may attend
    return out


# ---------------------------------------------------------------------------------------------
# Seed 000: cross-attention with key padding, uniform [0, 1) weights, unseeded
# ---------------------------------------------------------------------------------------------

SEED000_D, SEED000_HEADS = 100, 5
SEED000_BATCH, SEED000_QUERIES, SEED000_KV = 2, 4, 6
SEED000_VALID_LENS = (3, 2)

# print(output[0][0]) in the seed: query 0 of sequence 0, all 100 features (unseeded draws).
SEED000_PRINTED_ROW = np.array(
    [
        1205.50019525, 1318.40294837, 1202.74795967, 1455.57568921, 1265.41910134,
        1412.39503534, 1265.6051992, 1105.08395357, 1241.69740915, 1284.52168046,
        1288.35849879, 1308.93026427, 1248.64984445, 1312.26703139, 1317.89851446,
        1339.90026899, 1407.58060749, 1303.10053768, 1297.05734393, 1088.51859258,
        1220.89544194, 1257.68897785, 1260.03487276, 1220.67801893, 1318.56893146,
        1404.3526966, 1348.78886246, 1400.71298358, 1379.90853954, 1182.99515963,
        1294.67726698, 1276.89072956, 1365.85742282, 1355.08934127, 1393.73412172,
        1297.58821378, 1199.39144261, 1202.4538607, 1379.05487506, 1337.54203429,
        1260.82261499, 1349.45802824, 1279.10416123, 1257.93569313, 1250.30616378,
        1322.03127264, 1186.5407581, 1237.53190197, 1359.0163692, 1241.83989194,
        1309.08616704, 1309.18611101, 1284.6503605, 1402.85942108, 1272.66630628,
        1306.35012271, 1384.70001294, 1343.42940202, 1282.52728987, 1295.70366797,
        1138.04981365, 1229.61215801, 1325.80515729, 1331.06053924, 1311.59336619,
        1364.84760246, 1357.24049113, 1339.48407166, 1287.65925432, 1334.2958758,
        1452.94043944, 1312.22185253, 1255.75561698, 1240.39891042, 1282.61245247,
        1133.35154662, 1374.52161694, 1241.82226361, 1248.0423815, 1322.6988869,
        1229.3635741, 1282.01347991, 1317.57304151, 1335.60310279, 1302.06795861,
        1263.22080951, 1332.02077941, 1324.73558321, 1327.52108457, 1301.3535082,
        1292.27089407, 1206.04247744, 1297.88020996, 1189.30013174, 1306.96166691,
        1360.9462695, 1312.06452925, 1198.68776006, 1297.10786271, 1353.59958087,
    ]
)  # (C,)


def seed000_inputs(seed: int = EXAMPLE_SEED) -> tuple[np.ndarray, np.ndarray, AttentionWeights]:
    """Queries (B, Tq, C), keys/values (B, Tk, C) and uniform [0, 1) weights, in the seed's draw order."""
    rng = np.random.default_rng(seed)
    w_q, w_k, w_v, w_o = (init_matrix(rng, "uniform", SEED000_D, SEED000_D) for _draw in range(4))  # (C, C) each
    queries = rng.random((SEED000_BATCH, SEED000_QUERIES, SEED000_D))  # (B, Tq, C)
    keys_values = rng.random((SEED000_BATCH, SEED000_KV, SEED000_D))  # (B, Tk, C)
    return queries, keys_values, AttentionWeights(w_q, w_k, w_v, w_o)


def seed000_run(valid_lens: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Cross-attention of 4 queries over 6 keys/values per sequence, keys padded by ``valid_lens``."""
    queries, keys_values, weights = seed000_inputs()
    masks = np.stack([padding_mask(SEED000_QUERIES, SEED000_KV, n) for n in valid_lens])  # (B, Tq, Tk)
    return _run_batch(queries, keys_values, keys_values, weights, SEED000_HEADS, masks)


def _seed000_magnitude(ours: dict[str, np.ndarray]) -> dict[str, bool]:
    """Uniform [0, 1) inputs and weights make outputs in the thousands, as the seed printed."""
    mean = float(ours["output"][0, 0].mean())
    low, high = float(SEED000_PRINTED_ROW.min()), float(SEED000_PRINTED_ROW.max())
    return {RANGE_CHECK.format(low=f"{low:.0f}", high=f"{high:.0f}"): low <= mean <= high}


def _seed000_empty_sequence(ours: dict[str, np.ndarray]) -> dict[str, bool]:
    """Sequence 2 has no valid key: every row is flagged and its weights and output are zero, not NaN."""
    return {
        N_("every row of sequence 2 is flagged fully masked"): bool(ours["fully_masked"][1].all()),
        N_("sequence 2's weights and output are all zero"): bool(
            np.all(ours["weights"][1] == 0) and np.all(ours["output"][1] == 0)
        ),
        N_("sequence 1 (valid length 3) is unaffected: no row flagged"): not ours["fully_masked"][0].any(),
    }


SEED000_SHAPES = {
    "output": (SEED000_BATCH, SEED000_QUERIES, SEED000_D),
    "weights": (SEED000_BATCH, SEED000_HEADS, SEED000_QUERIES, SEED000_KV),
}

SEED000 = SeedExample(
    key="000",
    title=N_("Cross-attention with key padding (d2l-style class)"),
    source_file="000_b071ea424b11d3d2.txt",
    summary=N_(
        "A MultiHeadAttention class in which 4 queries attend over 6 keys/values, for a batch of 2 "
        "sequences whose keys are padded to valid lengths 3 and 2; 5 heads over width 100."
    ),
    conventions={
        N_("layout"): N_("rows (tokens x features), batch first: queries (2, 4, 100), keys = values (2, 6, 100)"),
        N_("weights"): N_("W_q, W_k, W_v, W_o of shape (100, 100) drawn uniform [0, 1) with unseeded np.random.rand"),
        N_("heads"): N_("5 heads of size 20, contiguous column blocks of the fused projection"),
        N_("scale"): N_("1/sqrt(d_head) = 1/sqrt(20)"),
        N_("mask"): N_("key padding: query may attend to key j only if j < valid_len of its sequence (-inf otherwise)"),
        N_("output projection"): N_("W_o plus b_o"),
        N_("bias"): N_("optional (bias=True draws uniform biases); the seed ran with bias=False"),
        N_("quirks"): N_("accepts a dropout rate and never uses it; a valid length of 0 gives NaN rows"),
    },
    reproducible=False,
    note=N_(
        "The seed used unseeded np.random.rand, so its printed row cannot be reproduced. We draw the same "
        "shapes from np.random.default_rng({seed}) and check the structure: shapes, rows summing to 1, "
        "zero weight on padded keys, and outputs in the thousands like the seed's (uniform weights saturate the "
        "softmax into nearly one-hot rows). For a valid length of 0 every key is masked: the seed divides 0 by 0 "
        "and prints NaN; our engine returns zero weights, flags the rows in fully_masked and raises no warning."
    ),
    cases=(
        SeedCase(
            name=N_("batch of 2, valid lengths [3, 2]"),
            description=N_("The seed's run: 4 queries over 6 keys/values; only the first 3 (then 2) keys are real."),
            compute=lambda: seed000_run(SEED000_VALID_LENS),
            printed=None,
            decimals=None,
            shapes=SEED000_SHAPES,
            extra_checks=_seed000_magnitude,
        ),
        SeedCase(
            name=N_("valid length 0 (every key masked)"),
            description=N_(
                "Sequence 2 with no valid key at all: the seed yields NaN; we yield zero weights and zero head "
                "outputs, flagged in fully_masked."
            ),
            compute=lambda: seed000_run((3, 0)),
            printed=None,
            decimals=None,
            shapes=SEED000_SHAPES,
            extra_checks=_seed000_empty_sequence,
        ),
    ),
    explorer=MHAConfig(
        tokens=("where", "is", "the", "cat"),
        kv_tokens=("le", "chat", "dort", "sur", "le", "tapis"),
        d_model=SEED000_D,
        n_heads=SEED000_HEADS,
        init="uniform",
        mask="padding",
        valid_len=SEED000_VALID_LENS[0],
    ),
)


# ---------------------------------------------------------------------------------------------
# Seed 001: one head, one hand-written 4x3 matrix, scores scaled by 1/sqrt(number of tokens)
# ---------------------------------------------------------------------------------------------

SEED001_X = np.array(
    [
        [1.0, 0.0, 1.0, 0.0],
        [0.0, 2.0, 0.0, 2.0],
        [1.0, 1.0, 1.0, 1.0],
    ]
)  # (T, C) = (3, 4)

SEED001_W = np.array(
    [
        [1, 0, 1],
        [1, 0, 0],
        [0, 0, 1],
        [0, 1, 1],
    ]
)  # (C, hs) = (4, 3); the seed uses this one matrix as W_q, W_k and W_v

SEED001_PRINTED = {
    "scores": np.array(
        [
            [2.88675135, 3.46410162, 4.61880215],
            [3.46410162, 6.92820323, 6.92820323],
            [4.61880215, 6.92820323, 8.08290377],
        ]
    ),  # (Tq, Tk), already scaled
    "weights": np.array(
        [
            [0.11857409, 0.21121746, 0.67020845],
            [0.01540939, 0.4922953, 0.4922953],
            [0.02324709, 0.23406082, 0.74269209],
        ]
    ),  # (Tq, Tk)
    "output": np.array(
        [
            [1.88142591, 1.09264338, 2.67020845],
            [1.98459061, 1.47688591, 2.4922953],
            [1.97675291, 1.21081373, 2.74269209],
        ]
    ),  # (Tq, hs); the seed calls these rows "Attention Score for Input i"
}


def seed001_run() -> dict[str, np.ndarray]:
    """One head of size 3 on 3 tokens of width 4, scale 1/sqrt(number of tokens)."""
    weights = AttentionWeights(SEED001_W, SEED001_W, SEED001_W)
    trace = multi_head_attention(SEED001_X, weights, 1, scale=1.0 / math.sqrt(len(SEED001_X)))
    return {
        "scores": trace.logits[0],  # (Tq, Tk) scaled scores; no mask, so logits = scores * scale
        "weights": trace.weights[0],  # (Tq, Tk)
        "output": trace.output,  # (Tq, hs) = weights @ V; no output projection
    }


SEED001 = SeedExample(
    key="001",
    title=N_("One head, worked token by token"),
    source_file="001_e697f0fa12a4107d.txt",
    summary=N_(
        "Three tokens of width 4 go through one hand-written 4x3 matrix used as W_q, W_k and W_v; the "
        "scores are scaled by 1/sqrt(3), soft-maxed row by row and used to average the value rows."
    ),
    conventions={
        N_("layout"): N_("rows (tokens x features), x @ W"),
        N_("weights"): N_("one 4x3 matrix of 0s and 1s, the same for queries, keys and values (rectangular: 4 -> 3)"),
        N_("heads"): N_("a single head of size 3 (the text imagines 8 heads but computes one)"),
        N_("scale"): N_("1/sqrt(number of tokens) = 1/sqrt(3); it equals 1/sqrt(d_k) here only because d_k = 3 too"),
        N_("mask"): N_("none"),
        N_("output projection"): N_("none: the output is weights @ V"),
        N_("bias"): N_("none"),
        N_("quirks"): N_("prints the attention outputs as 'Attention Score for Input i'; softmax via scipy per row"),
    },
    reproducible=True,
    note=N_(
        "Fixed inputs, so every printed number is reproduced to its 8 decimals: the scaled scores, the weights "
        "and the outputs (which the seed calls attention scores). The explorer loads its shape (3 tokens, "
        "d_model 4, one head) and its scale rule, 1/sqrt(T); the 3x4 input can be uploaded as a CSV (the page offers "
        "it), and the explorer draws its own square weights: a 4x3 hand-written matrix does not fit."
    ),
    cases=(
        SeedCase(
            name=N_("3 tokens, 1 head of size 3"),
            description=N_("Scaled scores, weights and outputs (the seed's 'Attention Score for Input i')."),
            compute=seed001_run,
            printed=SEED001_PRINTED,
            decimals=8,
        ),
    ),
    explorer=MHAConfig(
        tokens=("input_1", "input_2", "input_3"),
        d_model=4,
        n_heads=1,
        init="uniform",
        scale_rule="sqrt_t",
        embedding="custom",
        custom_embedding=tuple(tuple(float(v) for v in row) for row in SEED001_X),
        output_projection=False,
    ),
)


# ---------------------------------------------------------------------------------------------
# Seed 002: already-projected Q, K, V; integer inputs from np.random.seed(42); no output projection
# ---------------------------------------------------------------------------------------------

# numpy prints 8 decimals by default and drops trailing zeros: "103." means 103.00000000.
SEED002_DECIMALS = 8


def seed002_draws(n_tokens: int, width: int) -> tuple[np.ndarray, AttentionWeights]:
    """The seed's integer X (T, C) and W_q, W_k, W_v (C, C), replayed on RandomState(42) in its order."""
    rng = np.random.RandomState(42)  # the seed's own legacy recipe, reproduced on purpose
    x = rng.permutation(np.arange(n_tokens * width)).reshape(n_tokens, width)  # (T, C)
    w_q = rng.randint(0, 4, size=(width, width))  # (C, C)
    w_k = rng.randint(0, 5, size=(width, width))  # (C, C)
    w_v = rng.randint(0, 6, size=(width, width))  # (C, C)
    return x, AttentionWeights(w_q, w_k, w_v)


def seed002_run(n_tokens: int, width: int, n_heads: int) -> dict[str, np.ndarray]:
    """Attention on the seed's integer projections; the engine computes them in float64."""
    x, weights = seed002_draws(n_tokens, width)
    trace = multi_head_attention(x, weights, n_heads)
    return {"X": x, "weights": trace.weights, "output": trace.output}  # output = concat: no W_o


def seed002_identity() -> dict[str, np.ndarray]:
    """Q = K = V = the 2x2 identity, 2 heads of size 1: identity projections reproduce them."""
    eye = np.eye(2, dtype=int)  # (T, C), integer as in the seed
    trace = multi_head_attention(eye, AttentionWeights(eye, eye, eye), 2)
    return {"weights": trace.weights, "output": trace.output}


SEED002_X_4X4 = np.array(
    [
        [0, 1, 5, 14],
        [13, 11, 8, 9],
        [2, 15, 4, 7],
        [10, 12, 3, 6],
    ]
)  # (T, C)

SEED002_X_6X8 = np.array(
    [
        [27, 40, 26, 43, 24, 37, 12, 19],
        [4, 25, 8, 3, 6, 39, 33, 13],
        [17, 45, 15, 9, 16, 29, 32, 46],
        [0, 31, 30, 5, 11, 34, 1, 44],
        [21, 2, 36, 35, 23, 41, 10, 22],
        [18, 47, 20, 7, 42, 14, 28, 38],
    ]
)  # (T, C)

# Each of these the seed printed as identical rows, one per token (the softmax is saturated).
SEED002_PRINTED_IDENTITY = np.array([[0.73105858, 0.5], [0.5, 0.73105858]])  # (T, C)
SEED002_PRINTED_CASE1 = np.tile([103.0, 109.0, 46.0, 99.0], (4, 1))  # (T, C)
SEED002_PRINTED_CASE2_ONE_HEAD = np.tile([471.0, 472.0, 429.0, 538.0, 377.0, 450.0, 531.0, 362.0], (6, 1))  # (T, C)
SEED002_PRINTED_CASE2 = np.tile([500.0, 463.0, 399.0, 495.0, 377.0, 450.0, 531.0, 362.0], (6, 1))  # (T, C)
SEED002_PRINTED_CASE3 = np.tile([547.0, 490.0, 399.0, 495.0, 377.0, 450.0, 531.0, 362.0], (6, 1))  # (T, C)


def seed002_case(name: str, description: str, x: np.ndarray, n_heads: int, printed_output: np.ndarray) -> SeedCase:
    """One of seed 002's random test cases: the X it printed (its shape names the draws), the heads, the output."""
    n_tokens, width = x.shape
    return SeedCase(
        name=name,
        description=description,
        compute=lambda: seed002_run(n_tokens, width, n_heads),
        printed={"X": x, "output": printed_output},
        decimals=SEED002_DECIMALS,
    )


SEED002 = SeedExample(
    key="002",
    title=N_("Heads split by reshape, integer test cases"),
    source_file="002_e14b43bdac7cdcda.txt",
    summary=N_(
        "Functions that take already-projected Q, K, V, split them into heads by reshaping, attend per head "
        "and concatenate; tried on a 2x2 identity and on three integer test cases drawn after np.random.seed(42)."
    ),
    conventions={
        N_("layout"): N_("rows (tokens x features); Q = X @ W_q etc. is computed before attention"),
        N_("weights"): N_("integer randint matrices: W_q in 0..3, W_k in 0..4, W_v in 0..5, after a permutation for X"),
        N_("heads"): N_("reshape (T, nh, hs) then transpose: head i = columns i*hs:(i+1)*hs, as ours"),
        N_("scale"): N_("1/sqrt(d_head)"),
        N_("mask"): N_("none"),
        N_("output projection"): N_("none: returns the concatenated heads"),
        N_("bias"): N_("none"),
        N_("quirks"): N_(
            "mixes tabs and spaces; returns concat.tolist() although every printed result is an array; in every "
            "random test case the scores are so large that each weight row is one-hot"
        ),
    },
    reproducible=True,
    note=N_(
        "We replay the seed's draws (permutation, then three randint calls) on np.random.RandomState(42), get "
        "the same integer X and weights, and the engine computes in float64. Every printed number matches. "
        "Because the softmax is saturated (one-hot rows), the random cases check the head split, not the scale; "
        "the identity example checks the scale."
    ),
    cases=(
        SeedCase(
            name=N_("identity example (2x2, 2 heads)"),
            description=N_("Q = K = V = identity, 2 heads of size 1; the only case whose weights are not one-hot."),
            compute=seed002_identity,
            printed={"output": SEED002_PRINTED_IDENTITY},
            decimals=SEED002_DECIMALS,
        ),
        seed002_case(
            N_("test case 1 (4x4, 2 heads)"),
            N_("X is a permutation of 0..15; integer weights; 2 heads of size 2."),
            SEED002_X_4X4,
            n_heads=2,
            printed_output=SEED002_PRINTED_CASE1,
        ),
        seed002_case(
            N_("test case 2, single head (6x8)"),
            N_("The seed's self_attention on the full width 8: one head, scale 1/sqrt(8)."),
            SEED002_X_6X8,
            n_heads=1,
            printed_output=SEED002_PRINTED_CASE2_ONE_HEAD,
        ),
        seed002_case(
            N_("test case 2 (6x8, 4 heads)"),
            N_("Same inputs, 4 heads of size 2: the first half of the row changes, the rest does not."),
            SEED002_X_6X8,
            n_heads=4,
            printed_output=SEED002_PRINTED_CASE2,
        ),
        seed002_case(
            N_("test case 3 (6x8, 2 heads)"),
            N_("Same inputs, 2 heads of size 4."),
            SEED002_X_6X8,
            n_heads=2,
            printed_output=SEED002_PRINTED_CASE3,
        ),
    ),
    explorer=MHAConfig(
        tokens=("the", "cat", "sat", "down"),
        d_model=4,
        n_heads=2,
        init="uniform",
        embedding="custom",
        custom_embedding=tuple(tuple(float(v) for v in row) for row in SEED002_X_4X4),
        output_projection=False,
    ),
)


# ---------------------------------------------------------------------------------------------
# Seed 003: tokens as columns, separate matrices and biases per head (UDL notebook 12.2)
# ---------------------------------------------------------------------------------------------

SEED003_D, SEED003_N, SEED003_HEADS = 8, 6, 2

SEED003_PRINTED_X = np.array(
    [
        [1.78862847, 0.43650985, 0.09649747, -1.8634927, -0.2773882, -0.35475898],
        [-0.08274148, -0.62700068, -0.04381817, -0.47721803, -1.31386475, 0.88462238],
        [0.88131804, 1.70957306, 0.05003364, -0.40467741, -0.54535995, -1.54647732],
        [0.98236743, -1.10106763, -1.18504653, -0.2056499, 1.48614836, 0.23671627],
        [-1.02378514, -0.7129932, 0.62524497, -0.16051336, -0.76883635, -0.23003072],
        [0.74505627, 1.97611078, -1.24412333, -0.62641691, -0.80376609, -2.41908317],
        [-0.92379202, -1.02387576, 1.12397796, -0.13191423, -1.62328545, 0.64667545],
        [-0.35627076, -1.74314104, -0.59664964, -0.58859438, -0.8738823, 0.02971382],
    ]
)  # (C, T): each column is a token

SEED003_TRUE_VALUES = np.array(
    [
        [-21.207, -5.373, -20.933, -9.179, -11.319, -17.812],
        [-1.995, 7.906, -10.516, 3.452, 9.863, -7.24],
        [5.479, 1.115, 9.244, 0.453, 5.656, 7.089],
        [-7.413, -7.416, 0.363, -5.573, -6.736, -0.848],
        [-11.261, -9.937, -4.848, -8.915, -13.378, -5.761],
        [3.548, 10.036, -2.244, 1.604, 12.113, -2.557],
        [4.888, -5.814, 2.407, 3.228, -4.232, 3.71],
        [1.248, 18.894, -6.409, 3.224, 19.717, -5.629],
    ]
)  # (C, T): the output X' in the seed's column layout


def seed003_inputs() -> np.ndarray:
    """The seed's X: standard normal (D, N) = (8, 6) from RandomState(3), tokens as columns."""
    return np.random.RandomState(3).normal(size=(SEED003_D, SEED003_N))  # (C, T)


def seed003_parameters() -> dict[str, np.ndarray]:
    """The seed's per-head omegas (hs, C), betas (hs, 1) and omega_c (C, C), drawn from RandomState(0) in order."""
    rng = np.random.RandomState(0)
    hs = SEED003_D // SEED003_HEADS
    params = {}
    for h in range(1, SEED003_HEADS + 1):
        for name in ("q", "k", "v"):
            params[f"omega_{name}{h}"] = rng.normal(size=(hs, SEED003_D))  # (hs, C)
        for name in ("q", "k", "v"):
            params[f"beta_{name}{h}"] = rng.normal(size=(hs, 1))  # (hs, 1)
    params["omega_c"] = rng.normal(size=(SEED003_D, SEED003_D))  # (C, nh*hs)
    return params


def seed003_row_weights(params: dict[str, np.ndarray]) -> AttentionWeights:
    """Column-layout per-head parameters -> our fused row-convention weights.

    Column layout computes q_h = omega_qh @ x + beta_qh for a column x; in rows that is
    x @ omega_qh.T + beta_qh.T, so head h's block of w_q is omega_qh.T and the blocks sit side by
    side. The output X' = omega_c @ O becomes concat @ omega_c.T.
    """
    heads = range(1, SEED003_HEADS + 1)

    def fused(name: str) -> np.ndarray:
        return np.concatenate([params[f"omega_{name}{h}"].T for h in heads], axis=1)  # (C, nh*hs)

    def bias(name: str) -> np.ndarray:
        return np.concatenate([params[f"beta_{name}{h}"][:, 0] for h in heads])  # (nh*hs,)

    return AttentionWeights(
        w_q=fused("q"),
        w_k=fused("k"),
        w_v=fused("v"),
        w_o=params["omega_c"].T,  # (nh*hs, C)
        b_q=bias("q"),
        b_k=bias("k"),
        b_v=bias("v"),
    )


def seed003_run() -> dict[str, np.ndarray]:
    """Our engine on the seed's inputs, output turned back into the seed's column layout."""
    x_columns = seed003_inputs()  # (C, T)
    trace = multi_head_attention(x_columns.T, seed003_row_weights(seed003_parameters()), SEED003_HEADS)
    return {
        "weights": trace.weights,  # (nh, Tq, Tk) in our convention; the seed's A_h is weights[h].T
        "output": trace.output.T,  # (C, T), comparable with the seed's X'
    }


SEED003 = SeedExample(
    key="003",
    title=N_("Tokens as columns, parameters per head (UDL notebook 12.2)"),
    source_file="003_019ec01f2b691aa0.txt",
    summary=N_(
        "Six tokens of width 8 stored as the columns of X; two heads, each with its own query, key and value "
        "matrices and biases; a column-wise softmax; the heads stacked and mixed by omega_c."
    ),
    conventions={
        N_("layout"): N_("columns (features x tokens): X is (8, 6), q = omega_q @ x + beta_q"),
        N_("weights"): N_("standard normal: X from np.random.seed(3), then the parameters from np.random.seed(0)"),
        N_("heads"): N_("separate (4, 8) matrices per head, i.e. our fused w_q = [omega_q1.T | omega_q2.T]"),
        N_("scale"): N_("1/sqrt(d_head) = 1/2"),
        N_("mask"): N_("none"),
        N_("output projection"): N_("omega_c (8, 8), no bias; in rows w_o = omega_c.T"),
        N_("bias"): N_("beta_q, beta_k, beta_v per head (our b_q = the heads' betas one after the other); none on output"),
        N_("softmax"): N_("over each column (keys), since score[m, n] = k_m . q_n"),
        N_("quirks"): N_("the first two versions of the function never ran (shape errors); only the last one matches"),
    },
    reproducible=True,
    note=N_(
        "We replay the seed's draws on RandomState(3) and RandomState(0), map the column layout to our rows "
        "(x = X.T, w_q = the omega_q.T side by side, b_q = the betas, w_o = omega_c.T), run our engine and "
        "turn the output back into columns. It matches the 'True values' to the 3 decimals printed; the input "
        "X matches the seed's print to 8 decimals."
    ),
    cases=(
        SeedCase(
            name=N_("inputs X (RandomState(3))"),
            description=N_("The seed's input matrix, tokens as columns, printed with 8 decimals."),
            compute=lambda: {"X": seed003_inputs()},
            printed={"X": SEED003_PRINTED_X},
            decimals=8,
        ),
        SeedCase(
            name=N_("true values (8x6, 2 heads)"),
            description=N_("X' = omega_c @ [O1; O2] in the seed's column layout."),
            compute=seed003_run,
            printed={"output": SEED003_TRUE_VALUES},
            decimals=3,
        ),
    ),
    explorer=MHAConfig(
        tokens=("the", "cat", "sat", "on", "the", "mat"),
        d_model=SEED003_D,
        n_heads=SEED003_HEADS,
        init="normal",
        bias=True,
        embedding="custom",
        custom_embedding=tuple(tuple(float(v) for v in row) for row in SEED003_PRINTED_X.T),
    ),
)


# ---------------------------------------------------------------------------------------------
# Seed 004: He-initialised weights, three different inputs Q, K, V, weights returned
# ---------------------------------------------------------------------------------------------

SEED004_D, SEED004_HEADS, SEED004_BATCH, SEED004_T = 512, 8, 2, 10


def seed004_inputs(seed: int = EXAMPLE_SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray, AttentionWeights]:
    """He-normal W_q, W_k, W_v, W_o (C, C), then inputs Q, K, V (B, T, C), in the seed's draw order."""
    rng = np.random.default_rng(seed)
    w_q, w_k, w_v, w_o = (init_matrix(rng, "he", SEED004_D, SEED004_D) for _draw in range(4))  # (C, C) each
    x_q, x_k, x_v = (rng.standard_normal((SEED004_BATCH, SEED004_T, SEED004_D)) for _draw in range(3))  # (B, T, C) each
    return x_q, x_k, x_v, AttentionWeights(w_q, w_k, w_v, w_o)


def seed004_run() -> dict[str, np.ndarray]:
    """Each sequence's queries, keys and values come from three different inputs."""
    x_q, x_k, x_v, weights = seed004_inputs()
    return _run_batch(x_q, x_k, x_v, weights, SEED004_HEADS)


SEED004 = SeedExample(
    key="004",
    title=N_("He initialisation, weights returned (tutorial class)"),
    source_file="004_ffb07a60118d3df3.txt",
    summary=N_(
        "A MultiHeadAttention class with He-scaled weights, 8 heads over width 512, run on a batch of 2 "
        "sequences of 10 tokens whose queries, keys and values are three different random inputs; it returns "
        "the output and the per-head weights."
    ),
    conventions={
        N_("layout"): N_("rows (tokens x features), batch first: Q, K, V inputs each (2, 10, 512)"),
        N_("weights"): N_("W_q, W_k, W_v, W_o of shape (512, 512), standard normal times sqrt(2/512) (He), unseeded"),
        N_("heads"): N_("8 heads of size 64, contiguous column blocks (reshape then transpose)"),
        N_("scale"): N_("1/sqrt(d_head) = 1/8"),
        N_("mask"): N_("none"),
        N_("output projection"): N_("W_o, no bias"),
        N_("bias"): N_("none"),
        N_("quirks"): N_("returns (output, weights); the printed arrays are abbreviated with '...'"),
    },
    reproducible=False,
    note=N_(
        "The seed's draws were unseeded, so its printed fragments cannot be reproduced. We draw the weights "
        "and then the three inputs from np.random.default_rng({seed}) and check the structure: shapes, "
        "finite values, weight rows summing to 1. The explorer cannot feed three different inputs, so it loads "
        "the closest self-attention layer: 10 tokens, width 512, 8 heads, He init."
    ),
    cases=(
        SeedCase(
            name=N_("batch of 2, 10 tokens, separate Q, K, V inputs"),
            description=N_("Output (2, 10, 512) and per-head weights (2, 8, 10, 10), as the seed returns them."),
            compute=seed004_run,
            printed=None,
            decimals=None,
            shapes={
                "output": (SEED004_BATCH, SEED004_T, SEED004_D),
                "weights": (SEED004_BATCH, SEED004_HEADS, SEED004_T, SEED004_T),
            },
        ),
    ),
    explorer=MHAConfig(
        tokens=("the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "."),
        d_model=SEED004_D,
        n_heads=SEED004_HEADS,
        init="he",
    ),
)


SEED_EXAMPLES: dict[str, SeedExample] = {ex.key: ex for ex in (SEED000, SEED001, SEED002, SEED003, SEED004)}


# ---------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------


def structural_checks(ours: dict[str, np.ndarray], shapes: Mapping[str, tuple[int, ...]]) -> dict[str, bool]:
    """Checks that hold whatever the random draws: shapes, finiteness, and what attention weights must be.

    ``weights`` (..., nh, Tq, Tk) rows sum to 1 except fully masked rows, which are all zero; with a
    ``mask`` (..., Tq, Tk), True = may attend, masked keys get weight exactly 0.
    """
    checks = {SHAPE_CHECK.format(name=name, shape=shape): ours[name].shape == tuple(shape) for name, shape in shapes.items()}
    floats = [a for a in ours.values() if np.issubdtype(a.dtype, np.floating)]
    checks[N_("no NaN or inf anywhere")] = all(np.all(np.isfinite(a)) for a in floats)
    if "weights" not in ours:
        return checks
    weights = ours["weights"]
    fully_masked = ours.get("fully_masked", np.zeros(weights.shape[:-1], dtype=bool))  # (..., nh, Tq)
    row_sums = weights.sum(axis=-1)  # (..., nh, Tq)
    checks[N_("weights lie in [0, 1]")] = bool(np.all((weights >= 0) & (weights <= 1)))
    rows = N_("every weight row sums to 1, except the fully masked ones") if fully_masked.any() else N_(
        "every weight row sums to 1")
    checks[rows] = bool(np.all(np.abs(row_sums[~fully_masked] - 1) <= ROW_SUM_TOL))
    if "mask" in ours:
        mask = np.expand_dims(ours["mask"], -3)  # (..., 1, Tq, Tk): the same mask for every head
        checks[N_("masked keys get weight exactly 0")] = bool(np.all(np.where(mask, 0.0, weights) == 0))
        no_key = np.broadcast_to(~mask.any(axis=-1), fully_masked.shape)  # (..., nh, Tq)
        checks[N_("rows flagged fully masked are exactly those with no key")] = bool(np.array_equal(no_key, fully_masked))
    if fully_masked.any():
        checks[N_("fully masked rows have all-zero weights")] = bool(np.all(weights[fully_masked] == 0))
    return checks


def compare(case: SeedCase) -> CaseComparison:
    """Run ``case`` on our engine and hold the result against what the seed printed."""
    ours = case.compute()
    shapes = dict(case.shapes)
    if case.printed is not None:
        shapes.update({name: np.shape(value) for name, value in case.printed.items()})
    checks = structural_checks(ours, shapes)
    if case.extra_checks is not None:
        checks.update(case.extra_checks(ours))
    if case.printed is None:
        return CaseComparison(case.name, ours, None, {}, None, None, checks)

    tolerance = 0.0 if case.decimals is None else printed_tolerance(case.decimals)
    diffs = {}
    for name, printed in case.printed.items():
        mine = ours[name]
        same_shape = mine.shape == np.shape(printed)
        diffs[name] = float(np.max(np.abs(mine - printed))) if same_shape else math.inf
    matches = all(d <= tolerance for d in diffs.values())
    return CaseComparison(case.name, ours, case.printed, diffs, tolerance, matches, checks)
