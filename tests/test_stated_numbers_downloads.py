"""Every download a page offers (Heads, Compare, Step by step, Seed notebooks), opened, and each block compared with
the engine array its title names (issue 32, item 8).

The pages run in AppTest with ``st.download_button`` recorded (label, bytes builder, key). Every recorded download is
opened (CSV with pandas, .npz with numpy, .json with json, the notebook by executing its cells in plain Python), cut
into its blocks (a stacked CSV's first index level, an archive's names, the notebook's ``app[...]`` entries) and each
block compared with an array this file takes from the engine's run or computes from it. A download this file does
not know fails the test, so a new button needs its check here. The grid of configurations holds grouped K/V heads
(1 < kv_heads < heads) under every kernel, and the notebook cross-attention under every scale rule.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
import streamlit
from shown_steps import open_downloads
from stated_numbers import TINY, assert_states
from streamlit.testing.v1 import AppTest

from mha_core.config import run
from mha_core.kernels import attention_kernel
from ui.state.urlstate import config_from_params

ROOT = Path(__file__).resolve().parents[1]
TOL = dict(rtol=1e-7, atol=1e-9)  # CSVs keep 9 significant digits


@pytest.fixture
def offered(monkeypatch):
    """key -> (label, bytes) of every download button a page run draws (the bytes built as a click would)."""
    from streamlit.delta_generator import DeltaGenerator

    captured: dict[str, tuple[str, object]] = {}
    original, method = streamlit.download_button, DeltaGenerator.download_button

    def record(label, data, kwargs):
        captured[kwargs.get("key") or label] = (label, data)

    def recording(label, data, *args, **kwargs):
        record(label, data, kwargs)
        return original(label, data, *args, **kwargs)

    def recording_method(self, label, data, *args, **kwargs):
        record(label, data, kwargs)
        return method(self, label, data, *args, **kwargs)

    monkeypatch.setattr(streamlit, "download_button", recording)
    monkeypatch.setattr(DeltaGenerator, "download_button", recording_method)
    return captured


def opened(captured: dict) -> dict[str, tuple[str, bytes]]:
    return {key: (label, data() if callable(data) else data) for key, (label, data) in captured.items()}


LAZY_DOWNLOADS = {"heads": "heads_downloads"}  # a page whose downloads are drawn only while their section is open


def open_page(page: str, params: dict[str, str]) -> AppTest:
    """``page`` opened from a link with ``params``, its downloads' section open (as a click on its header leaves it)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(f"app_pages/{page}.py")
    for name, value in params.items():
        at.query_params[name] = value
    if page in LAZY_DOWNLOADS:
        at.session_state[LAZY_DOWNLOADS[page]] = True
    at.run()
    if page == "step_by_step":  # its downloads are drawn only while their section is open
        open_downloads(at)
    assert not at.exception, at.exception
    return at


def engine(params: dict[str, str]):
    config, messages = config_from_params({k: v for k, v in params.items() if not k.startswith("b_")})
    assert not messages, messages
    return run(config)


def csv(data: bytes, levels: int) -> pd.DataFrame:
    return pd.read_csv(io.BytesIO(data), index_col=list(range(levels)), encoding="utf-8-sig")


def blocks(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """A stacked table's blocks by title (the first index level), columns another block has dropped."""
    return {title: frame.loc[title].dropna(axis=1, how="all") for title in frame.index.get_level_values(0).unique()}


def same(shown, expected, what: str) -> None:
    shown, expected = np.asarray(shown, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert shown.shape == expected.shape, (what, shown.shape, expected.shape)
    finite = np.isfinite(expected)
    assert (np.isfinite(shown) == finite).all(), (what, "masked cells differ")
    np.testing.assert_allclose(shown[finite], expected[finite], err_msg=what, **TOL)


def merged(x: np.ndarray) -> np.ndarray:
    """(nh, T, hs) -> (T, nh*hs), head h in columns h*hs..(h+1)*hs - 1."""
    return np.concatenate(list(x), axis=1)


# ---- what each head does, from the weights -----------------------------------------------------------------------

def row_stats(weights: np.ndarray, logits: np.ndarray, cross: bool) -> dict[str, np.ndarray]:
    """Per head, averaged over the rows that are not fully masked: entropy / log(keys allowed), the row's largest
    weight, the weight on key i, on key i - 1 and on key 0."""
    nh, tq, tk = weights.shape
    out = {name: np.full(nh, np.nan) for name in ("entropy", "max", "itself", "previous", "first")}
    for h in range(nh):
        rows = [i for i in range(tq) if np.isfinite(logits[h, i]).any()]
        allowed = np.isfinite(logits[h]).sum(-1)
        ent = [-(w[w > 0] * np.log(w[w > 0])).sum() / np.log(allowed[i]) for i in rows if allowed[i] > 1
               for w in [weights[h, i]]]
        out["entropy"][h] = np.mean(ent) if ent else np.nan
        out["max"][h] = np.mean([weights[h, i].max() for i in rows])
        out["first"][h] = np.mean([weights[h, i, 0] for i in rows])
        if not cross:
            out["itself"][h] = np.mean([weights[h, i, i] for i in rows if i < tk])
            prev = [weights[h, i, i - 1] for i in rows if 1 <= i <= tk]
            out["previous"][h] = np.mean(prev) if prev else np.nan
    return out


def column_for(frame: pd.DataFrame, word: str) -> str:
    (name,) = [c for c in frame.columns if word in c.lower()]
    return name


# ---- Heads ---------------------------------------------------------------------------------------------------------

HEADS_GRID = [dict(zip(("kernel", "view"), combo, strict=True), **extra)
              for combo in itertools.product(("softmax", "differential", "linear"), ("weights", "logits", "scores"))
              for extra in ({"mask": "causal"},)] + [
    {"kernel": "softmax", "view": "weights", "kv_tokens": "x y z w", "null": "1", "bias": "1"},
    {"kernel": "softmax", "view": "logits", "pe": "alibi", "mask": "window", "window": "1", "wo": "0"},
]


@pytest.mark.parametrize("extra", HEADS_GRID, ids=lambda e: "-".join(e.values()).replace(" ", "_"))
def test_every_heads_download_holds_the_engine_arrays_its_titles_name(extra, offered):
    params = {"tokens": "the cat sat on a mat", "d_model": "16", "heads": "4", "kv_heads": "2", "seed": "3",
              "avg": "1", "knock": "1,2", **extra}
    result = engine({k: v for k, v in params.items() if k not in ("view", "avg", "knock")})
    trace, w = result.trace, result.weights
    nh, off = trace.n_heads, (1, 2)
    at = open_page("heads", params)
    files = opened(offered)
    (identity,) = [m.value for m in at.markdown if "max |output" in m.value]  # Take it apart's live check
    assert_states(identity.split("max |output")[1], [TINY])
    shown = {"weights": trace.weights, "logits": trace.logits, "scores": trace.scores}[params["view"]]
    maps = {"": shown}  # the maps the view shows per head, by the name its blocks carry after "head h"
    if params["view"] == "logits" and params["kernel"] == "differential":  # the two half-head logits L₁, L₂
        maps = {" · L₁": trace.kernel_parts.logits1, " · L₂": trace.kernel_parts.logits2}
    if params["view"] == "logits" and params["kernel"] == "linear":  # φ(q)·φ(k), a masked cell 0 (not −∞)
        maps = {"": trace.kernel_parts.similarity}
    w_o = w.w_o if w.w_o is not None else np.eye(trace.concat.shape[1])
    hv = trace.concat.shape[1] // nh
    contributions = np.stack([trace.concat[:, h * hv : (h + 1) * hv] @ w_o[h * hv : (h + 1) * hv] for h in range(nh)])
    b_o = 0.0 if w.b_o is None else w.b_o
    knocked = trace.output - contributions[list(off)].sum(axis=0)
    checked = set()

    def check(key, test):
        test(files[key][1])
        checked.add(key)

    def grid(data):
        found = blocks(csv(data, 2))
        assert list(found) == [*(f"head {h}{name}" for h in range(nh) for name in maps),
                               *[t for t in found if "average" in t]]
        for h in range(nh):
            for name, values in maps.items():
                same(found[f"head {h}{name}"], values[h], f"head {h}{name}")
                assert list(found[f"head {h}{name}"].index) == result.query_labels  # rows are queries, keys columns
                assert list(found[f"head {h}{name}"].columns) == result.key_labels
        averages = [t for t in found if "average" in t]
        assert len(averages) == len(maps)
        for average, (name, values) in zip(averages, maps.items(), strict=True):
            assert average.endswith(name)
            same(found[average], values.mean(axis=0), average)

    def summary(data):
        frame = csv(data, 1)
        assert list(frame.index) == [f"head {h}" for h in range(nh)]
        stats = row_stats(trace.weights, trace.logits, result.config.is_cross)
        if attention_kernel(params["kernel"]).rows_are_distributions:
            same(frame[column_for(frame, "entropy")], stats["entropy"], "entropy")
        else:  # signed rows (A₁ − λA₂) are no probability distribution: no entropy column
            assert not [c for c in frame.columns if "entropy" in c.lower()], list(frame.columns)
        same(frame[column_for(frame, "max")], stats["max"], "mean row max")
        same(frame[column_for(frame, "first")], stats["first"], "on first token")
        if not result.config.is_cross:
            same(frame[column_for(frame, "itself")], stats["itself"], "on itself")
            same(frame[column_for(frame, "previous")], stats["previous"], "on previous")

    def similarity(data):
        flat = trace.weights.reshape(nh, -1)
        unit = flat / np.linalg.norm(flat, axis=1, keepdims=True)
        same(csv(data, 1), unit @ unit.T, "similarity")

    def concat(data):
        same(csv(data, 1), trace.concat, "concat")
        same(csv(data, 1).to_numpy() @ w_o + b_o, trace.output, "concat · W_O + b_O")

    def output(data):
        same(csv(data, 1), trace.output, "output")

    def contributions_csv(data):
        found = blocks(csv(data, 2))
        assert list(found) == [f"head {h}" for h in range(nh)]
        for h in range(nh):
            same(found[f"head {h}"], contributions[h], f"head {h}'s contribution")
        same(sum(found[f"head {h}"].to_numpy() for h in range(nh)) + b_o, trace.output, "Σ contributions + b_O")

    def knock_change(data):
        frame = csv(data, 1)
        same(frame[column_for(frame, "‖output‖")], np.linalg.norm(trace.output, axis=1), "‖output‖")
        same(frame[column_for(frame, "after")], np.linalg.norm(knocked, axis=1), "‖output after knock-out‖")
        same(frame[column_for(frame, "change")], np.linalg.norm(knocked - trace.output, axis=1), "‖change‖")

    def knock_output(data):
        same(csv(data, 1), knocked, "output after knock-out")

    def carried(data):
        found = blocks(csv(data, 2))
        for h in range(nh):
            v_h = trace.v[trace.kv_head_of(h)]  # (Tk, hv)
            v = v_h @ w_o[h * hv : (h + 1) * hv]  # (Tk, C_out)
            same(found[f"head {h} weight"], trace.weights[h], f"head {h} weight")
            # the one number per row a kernel multiplies A·V by before the concatenation (differential: its norm),
            # read from the engine's concatenation itself: block = c_i (A·V)_i
            av, block = trace.weights[h] @ v_h, trace.concat[:, h * hv : (h + 1) * hv]  # (Tq, hv) each
            c = np.einsum("id,id->i", block, av) / np.einsum("id,id->i", av, av)  # (Tq,)
            np.testing.assert_allclose(block, c[:, None] * av, atol=1e-12)
            (title,) = [t for t in found if t.startswith(f"head {h} ") and t != f"head {h} weight"]
            same(found[title], np.abs(c[:, None] * trace.weights[h]) * np.linalg.norm(v, axis=1)[None], title)

    def archive(data):
        arrays = np.load(io.BytesIO(data), allow_pickle=False)
        engine_arrays(arrays, result)

    def json_file(data):
        document = json.loads(data)
        engine_arrays({name: from_json(value) for name, value in document["arrays"].items()}, result)
        assert document["query_labels"] == result.query_labels and document["key_labels"] == result.key_labels

    def notebook(data):
        notebook_blocks(data, result)

    tests = {"dl_grid": grid, "dl_summary": summary, "dl_similarity": similarity, "dl_concat": concat,
             "dl_output": output, "dl_contributions": contributions_csv, "dl_knock_change": knock_change,
             "dl_knock_output": knock_output, "dl_carried": carried, "dl_npz": archive, "dl_json": json_file,
             "dl_notebook": notebook}
    if not result.config.output_projection:
        tests.pop("dl_output")
    assert set(files) == set(tests), f"downloads offered: {sorted(files)}; checked here: {sorted(tests)}"
    for key, test in tests.items():
        check(key, test)
    assert checked == set(files)


# ---- the whole run: every intermediate by its name ---------------------------------------------------------------

def engine_arrays(arrays, result) -> None:
    """Each named array of an export against the engine's field of that name (the run, its weights or its trace),
    and the ones a reader would recompute against numbers this file computes."""
    trace = result.trace
    fields = {}
    for record in (result, result.weights, result.kernel_params, result.mla_weights, trace, trace.kernel_parts,
                   trace.mla):
        if record is not None:
            fields.update({name: getattr(record, name) for name in record.__dataclass_fields__})
    names = [n for n in arrays if n not in ("query_labels", "key_labels", "config_json")]
    assert {"weights", "logits", "scores", "q", "k", "v", "heads", "concat", "output", "w_q"} <= set(names)
    for name in names:
        value = fields[name]
        if isinstance(value, str | bool):
            assert str(np.asarray(arrays[name])) == str(value), name
            continue
        same(np.asarray(arrays[name], dtype=np.float64), np.asarray(value, dtype=np.float64), name)
    # What the names promise, recomputed: softmax's rows, the scores from q and k, the output from concat and W_O.
    same(np.asarray(arrays["scores"], dtype=np.float64),
         trace.q @ np.swapaxes(trace.k[[trace.kv_head_of(h) for h in range(trace.n_heads)]], 1, 2), "q·kᵀ")
    w_o = result.weights.w_o
    out = np.asarray(arrays["concat"], dtype=np.float64) @ (w_o if w_o is not None else np.eye(trace.concat.shape[1]))
    same(out + (0 if result.weights.b_o is None else result.weights.b_o), trace.output, "concat · W_O")
    if "query_labels" in arrays:
        assert list(arrays["query_labels"]) == result.query_labels and list(arrays["key_labels"]) == result.key_labels


def from_json(value) -> np.ndarray:
    """A JSON array back to numpy; null (a masked logit, JSON has no infinity) back to -inf."""
    array = np.array(value)
    if array.dtype == object:
        array = np.array([[[-np.inf if x is None else x for x in row] for row in m] for m in value]
                         if array.ndim == 3 else [[-np.inf if x is None else x for x in row] for row in value])
    return array


# ---- the notebook: executed, and its embedded numbers against the engine ---------------------------------------------

def notebook_entries(result) -> dict[str, np.ndarray]:
    """What the notebook's ``app[...]`` entries are named after, from the engine's run."""
    trace, config = result.trace, result.config
    nh = trace.n_heads
    read = [trace.kv_head_of(h) for h in range(nh)]
    q_plain = trace.q if trace.q_unrotated is None else trace.q_unrotated
    k_plain = trace.k if trace.k_unrotated is None else trace.k_unrotated
    entries = {
        "X": result.x_q, "X_kv": result.x_kv, "Q": merged(q_plain), "K": merged(k_plain), "V": merged(trace.v),
        "Q_h": q_plain, "K_h": k_plain, "V_h": trace.v, "reads": np.array(read), "K_h_read": k_plain[read],
        "V_h_read": trace.v[read], "theta_q": trace.q_angles, "theta_k": trace.k_angles, "Q_rot": trace.q,
        "K_rot": trace.k[read] if trace.k.shape[0] != nh else trace.k, "S": trace.scores, "s": trace.scale,
        "M": np.isfinite(trace.logits[0]) if result.mask is None else result.mask, "L": trace.logits, "A": trace.weights, "heads": trace.heads, "concat": trace.concat,
        "Y": trace.output, "B": trace.bias,
        "L_scaled": trace.scores * trace.scale,  # before the bias and the mask
        "L_biased": trace.scores * trace.scale + (0.0 if trace.bias is None else trace.bias),
    }
    parts = trace.kernel_parts
    if config.kernel == "differential":
        entries.update({"L1": parts.logits1, "L2": parts.logits2, "A1": parts.map1, "A2": parts.map2,
                        "lam": parts.lam, "mixed": parts.normed_heads})
    if config.kernel == "linear":
        entries.update({"phi_Q": parts.phi_q, "phi_K": parts.phi_k, "sim": parts.similarity, "z": parts.normaliser,
                        "S_state": parts.state, "z_state": parts.state_sum, "recurrent": parts.recurrent_heads})
    return entries


def notebook_blocks(data: bytes, result) -> None:
    notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
    namespace: dict = {}
    for cell in notebook.cells:
        if cell.cell_type == "code" and "matplotlib" not in cell.source:
            exec(compile(cell.source, "<notebook cell>", "exec"), namespace)  # noqa: S102 - the notebook's own asserts
    expected = notebook_entries(result)
    app = namespace["app"]
    for name, value in app.items():
        assert name in expected, f"the notebook embeds {name!r}, which this test cannot name from the engine"
        target = expected[name]
        if name in ("phi_K", "S_state", "z_state") and np.shape(value) != np.shape(target):  # per query head
            target = np.asarray(target)[[result.trace.kv_head_of(h) for h in range(result.trace.n_heads)]]
        same(np.where(np.asarray(value) == None, -np.inf, value) if np.asarray(value).dtype == object  # noqa: E711
             else value, target, f"notebook app[{name!r}]")
    for name in ("W_Q", "W_K", "W_V"):
        same(namespace[name], getattr(result.weights, name.lower()), name)
    same(namespace["X"], result.x_q, "X as the notebook rebuilds it")


SCALES = {"sqrt_dk": {}, "sqrt_t": {}, "none": {}, "temperature": {"temperature": "0.5"}}


@pytest.mark.parametrize(("scale", "kernel", "pe"), [
    (scale, kernel, pe) for scale, (kernel, pe) in itertools.product(
        SCALES, (("softmax", "rope"), ("softmax", "sinusoidal"), ("differential", "none"), ("linear", "rope")))
    if not (kernel == "linear" and scale != "sqrt_dk")])
def test_cross_attention_notebook_under_every_scale_rule(scale, kernel, pe, offered):
    params = {"tokens": "a b c", "kv_tokens": "x y z w", "d_model": "16", "heads": "4", "kv_heads": "2",
              "scale": scale, "kernel": kernel, "pe": pe, "seed": "7", **SCALES[scale]}
    result = engine(params)
    assert result.config.is_cross and result.config.scale_rule == scale
    open_page("heads", params)
    files = opened(offered)
    notebook_blocks(files["dl_notebook"][1], result)
    d_k = 4 // 2 if kernel == "differential" else 4  # a differential head scores with each half of q and k
    # 1/√T with T the keys counted (4 here; the queries are 3)
    expected_scale = {"sqrt_dk": 1 / np.sqrt(d_k), "sqrt_t": 1 / np.sqrt(4), "none": 1.0, "temperature": 2.0}[scale]
    assert result.trace.scale == pytest.approx(expected_scale)


# ---- Compare -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("change", [{"b_mask": "causal"}, {"b_kv_heads": "4"}, {"b_kernel": "differential"},
                                    {"b_scale": "none", "b_heads": "2"}])
def test_compare_downloads_hold_a_b_and_b_minus_a(change, offered):
    base = {"tokens": "the cat sat on a mat", "d_model": "16", "heads": "4", "kv_heads": "2", "seed": "1"}
    params = {**base, **change}
    result_a = engine(base)
    result_b = engine({**base, **{k[2:]: v for k, v in change.items()}})
    open_page("compare", params)
    files = opened(offered)
    assert set(files) == {"dl_compare", "dl_compare_heads"}
    n = min(result_a.trace.n_heads, result_b.trace.n_heads)
    wa, wb = result_a.trace.weights[:n], result_b.trace.weights[:n]
    found = blocks(csv(files["dl_compare"][1], 2))
    assert len(found) == 3 * n
    for h in range(n):
        same(found[f"A head {h}"], wa[h], f"A head {h}")
        same(found[f"B head {h}"], wb[h], f"B head {h}")
        (delta,) = [t for t in found if re.fullmatch(rf"B\s*[-−]\s*A head {h}", t)]
        same(found[delta], wb[h] - wa[h], delta)
    heads = csv(files["dl_compare_heads"][1], 1)
    for h in range(n):
        row = heads.loc[f"head {h}"]
        size = np.abs(wb[h] - wa[h])
        i, j = np.unravel_index(size.argmax(), size.shape)
        assert row["query"] == result_a.query_labels[i] and row["key"] == result_a.key_labels[j]
        same(row[column_for(heads, "largest")], size.max(), "largest |B − A|")
        same(row[column_for(heads, "mean")], size.mean(), "mean |B − A|")
        same(row["A"], wa[h, i, j], "A")
        same(row["B"], wb[h, i, j], "B")


# ---- Step by step --------------------------------------------------------------------------------------------------

def step_block(title: str, result, head: int) -> np.ndarray | None:
    """The engine array a Step-by-step matrix title names (by its leading symbol), or None when unknown."""
    trace = result.trace
    g = trace.kv_head_of(head)
    q_plain = trace.q if trace.q_unrotated is None else trace.q_unrotated
    k_plain = trace.k if trace.k_unrotated is None else trace.k_unrotated
    h, kv = str(head), str(g)
    parts = trace.kernel_parts
    rules = [
        (r"E(_q)?:", result.embeddings), (r"E_kv:", result.key_embeddings), (r"P:", result.positional),
        (r"X = E \+ P", result.x_q), (r"X_kv = ", result.x_kv),
        (r"W_Q$", result.weights.w_q), (r"W_K$", result.weights.w_k), (r"W_V$", result.weights.w_v),
        (r"W_O$", result.weights.w_o), (r"Q \(", merged(q_plain)), (r"K \(", merged(k_plain)),
        (r"V \(", merged(trace.v)),
        (rf"Q_{h}$", q_plain[head]), (rf"Q_{h} before", q_plain[head]), (rf"Q_{h} rotated", trace.q[head]),
        (rf"K_(\({kv}\)|{h})$", k_plain[g]), (rf"K_\({kv}\) \(", k_plain[g]), (rf"K_\({kv}\):", k_plain[g]),
        (rf"K_(\({kv}\)|{h}) before", k_plain[g]), (rf"K_(\({kv}\)|{h}) rotated", trace.k[g]),
        (rf"V_(\({kv}\)|{h})($| \()", trace.v[g]),
        (r"Which K/V head", np.eye(trace.kv_heads)[[trace.kv_head_of(x) for x in range(trace.n_heads)]]),
        (r"θ", trace.q_angles), (rf"S_{h} = ", trace.scores[head]), (rf"S_{h} × scale$", trace.scores[head] * trace.scale),
        (rf"B_{h} = ", None if trace.bias is None else trace.bias[head]),
        (rf"S_{h} × scale \+ B_{h}", None if trace.bias is None else trace.scores[head] * trace.scale + trace.bias[head]),
        (r"M:", result.mask), (rf"L_{h}:", trace.logits[head]), (rf"A_{h} = softmax", trace.weights[head]),
        (rf"head_{h} = A_{h} V", trace.heads[head]), (r"concat", trace.concat), (r"Y:", trace.output),
    ]
    if trace.kernel == "differential":
        rules += [(r"L₁", parts.logits1[head]), (r"L₂", parts.logits2[head]), (r"A₁ = ", parts.map1[head]),
                  (r"A₂ = ", parts.map2[head]), (rf"A_{h} = A₁ − λA₂", trace.weights[head]),
                  (r"RMSNorm", parts.normed_heads[head])]
    if trace.kernel == "linear":
        rules += [(rf"φ\(Q_{h}\)$", parts.phi_q[head]), (rf"φ\(K_(\({kv}\)|{h})\)$", parts.phi_k[g]),
                  (rf"φ\(Q_{h}\) φ\(K\)ᵀ", parts.similarity[head]), (rf"A_{h} = row", trace.weights[head]),
                  (rf"S_T \(head {h}\)", None if parts.state is None else parts.state[head]),
                  (rf"head_{h} from the state", None if parts.recurrent_heads is None else parts.recurrent_heads[head])]
    for pattern, array in rules:
        if array is not None and re.match(pattern, title):
            return array
    return None


@pytest.mark.parametrize("extra", [
    {"kernel": kernel, "pe": pe, **more}
    for (kernel, pe), more in itertools.product(
        (("softmax", "rope"), ("softmax", "alibi"), ("differential", "none"), ("linear", "sinusoidal")),
        ({"mask": "causal"}, {"mask": "window", "window": "1", "null": "0"}))])
def test_step_by_step_csvs_hold_the_engine_array_each_title_names(extra, offered):
    params = {"tokens": "the cat sat on a mat", "d_model": "16", "heads": "4", "kv_heads": "2", "seed": "9",
              "head": "3", **extra}
    result = engine({k: v for k, v in params.items() if k != "head"})
    open_page("step_by_step", params)
    files = opened(offered)
    unknown = []
    for key, (_, data) in files.items():
        if key == "sbs_dl_npz":
            engine_arrays(np.load(io.BytesIO(data), allow_pickle=False), result)
        elif key.endswith("notebook"):
            notebook_blocks(data, result)
        else:
            assert key.startswith("sbs_dl_"), key
            for title, block in blocks(csv(data, 2)).items():
                expected = step_block(title, result, 3)
                if expected is None:
                    unknown.append(title)
                    continue
                expected = np.asarray(expected, dtype=np.float64)
                same(block.to_numpy()[:, : expected.shape[1]] if block.shape != expected.shape else block, expected,
                     f"{key}: {title}")
    assert not unknown, f"matrix titles this test cannot name from the engine: {unknown}"
    assert len(files) >= 8


# ---- Seed notebooks ------------------------------------------------------------------------------------------------

def test_each_seed_input_matrix_download_is_the_seeds_own_matrix_and_the_engines_embeddings(offered):
    from content import seeds

    by_seed = {"001": seeds.SEED001_X, "002": seeds.SEED002_X_4X4, "003": np.asarray(seeds.SEED003_PRINTED_X).T}
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("app_pages/seeds.py")
    at.run()
    assert not at.exception
    files = opened(offered)  # every seed is drawn in its tab on one run
    keys = {k for k in files if k.startswith("seed_csv_")}
    assert keys == {f"seed_csv_{k}" for k, e in seeds.SEED_EXAMPLES.items()
                    if e.explorer is not None and e.explorer.custom_embedding is not None}
    assert len(keys) == len(by_seed)
    for key in keys:
        seed = key.removeprefix("seed_csv_")
        matrix = np.loadtxt(io.BytesIO(files[key][1]), delimiter=",", ndmin=2)
        same(matrix, by_seed[seed], f"{key}: the seed's X")
        same(matrix, run(seeds.SEED_EXAMPLES[seed].explorer).embeddings, f"{key}: the engine's embeddings")
