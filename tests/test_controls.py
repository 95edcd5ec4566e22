"""ui.controls without a running app: parsing uploaded matrices and the presentation-mode summary line."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest

from mha_core.config import MHAConfig
from ui.widgets.presentation import summary_line
from ui.widgets.uploads import MAX_UPLOAD_BYTES, parse_matrix


def npy_bytes(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def test_a_csv_of_numbers_parses_to_the_same_matrix():
    expected = np.array([[0.5, -1.25, 3.0], [1e-3, 2.0, -7.5]])
    text = "\n".join(",".join(repr(float(v)) for v in row) for row in expected)
    assert np.array_equal(parse_matrix("emb.csv", text.encode()), expected)


def test_a_single_row_csv_is_still_a_matrix():
    assert parse_matrix("one.csv", b"1,2,3\n").shape == (1, 3)


def test_a_float_npy_parses_exactly():
    expected = np.random.default_rng(0).standard_normal((4, 6))
    got = parse_matrix("emb.NPY", npy_bytes(expected))
    assert got.dtype == np.float64 and np.array_equal(got, expected)


def test_an_integer_npy_becomes_float():
    got = parse_matrix("ints.npy", npy_bytes(np.arange(6).reshape(2, 3)))
    assert got.dtype == np.float64 and got[1, 2] == 5.0


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("words.csv", b"the,cat\nsat,on\n", "not a CSV of numbers"),
        ("ragged.csv", b"1,2,3\n4,5\n", "not a CSV of numbers"),
        ("header.csv", b"a,b\n1,2\n", "not a CSV of numbers"),
        ("latin1.csv", "1,2\n3,\xe9".encode("latin-1"), "not a CSV of numbers"),
        ("nan.csv", b"1,2\nnan,4\n", "NaN or infinite"),
        ("inf.csv", b"1,inf\n3,4\n", "NaN or infinite"),
        ("garbage.npy", b"\x93NUMPY but not really", "not a valid .npy"),
        ("empty.npy", b"", "not a valid .npy"),
    ],
)
def test_a_malformed_file_is_refused_with_the_reason(name, data, reason):
    with pytest.raises(ValueError, match=reason):
        parse_matrix(name, data)


def test_a_pickled_npy_is_refused_and_never_unpickled(tmp_path):
    marker = tmp_path / "unpickled"

    class Tripwire:
        def __reduce__(self):
            return (marker.touch, ())

    objects = np.empty(2, dtype=object)
    objects[0], objects[1] = Tripwire(), Tripwire()
    data = npy_bytes(objects)
    assert b"'descr': '|O'" in data  # an object array: its payload is a pickle
    with pytest.raises(ValueError, match="not a valid .npy"):
        parse_matrix("evil.npy", data)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("array", "reason"),
    [
        (np.zeros((2, 3, 4)), "2-D"),
        (np.zeros(5), "2-D"),
        (np.array([[1.0, np.nan]]), "NaN or infinite"),
        (np.array([["a", "b"]]), "2-D matrix of numbers"),
        (np.array([[True, False]]), "2-D matrix of numbers"),
    ],
)
def test_an_npy_of_the_wrong_kind_is_refused(array, reason):
    with pytest.raises(ValueError, match=reason):
        parse_matrix("bad.npy", npy_bytes(array))


def test_a_file_over_the_size_limit_is_refused_before_parsing():
    data = b"1," * (MAX_UPLOAD_BYTES // 2) + b"1\n"
    assert len(data) > MAX_UPLOAD_BYTES
    with pytest.raises(ValueError, match="limit"):
        parse_matrix("big.csv", data)


def test_the_summary_line_names_sentence_heads_width_and_mask():
    line = summary_line(replace(MHAConfig(), mask="causal", n_heads=2))
    assert "the cat sat on the mat" in line
    assert "2 heads" in line and "mask: causal" in line
    assert "W_O" not in line


def test_the_summary_line_names_todays_attention_settings_only_when_set():
    assert "K/V" not in summary_line(MHAConfig()) and "positions" not in summary_line(MHAConfig())
    line = summary_line(MHAConfig(n_heads=4, kv_heads=1, pe="rope", null_key=True))
    assert "1 K/V head" in line and "positions: RoPE" in line and "null key" in line
    assert "positions: ALiBi" in summary_line(MHAConfig(pe="alibi"))
    assert "positions: sinusoidal" in summary_line(MHAConfig(pe="sinusoidal"))
    assert "2 K/V heads" in summary_line(MHAConfig(n_heads=4, kv_heads=2))


def test_a_long_sentence_is_cut_in_the_summary_line():
    line = summary_line(MHAConfig(tokens=tuple(f"w{i}" for i in range(20)), d_model=16))
    assert "w5" in line and "w6" not in line and "(20 tokens)" in line


def test_the_summary_line_mentions_what_differs_from_the_standard_layer():
    config = MHAConfig(kv_tokens=("a", "dog"), init="previous", scale_rule="none", output_projection=False)
    line = summary_line(config)
    assert "**`the cat sat on the mat`** → **`a dog`**" in line
    assert "previous-token" in line and "scale: none" in line and "no W_O" in line


def test_the_summary_line_shows_the_words_as_typed_not_as_markdown():
    line = summary_line(MHAConfig(tokens=(":smile:", "$x$", "*a*", "<b>b</b>")))
    assert "`:smile: $x$ *a* <b>b</b>`" in line  # one code span: Streamlit shows it verbatim


@pytest.mark.parametrize(("config", "shown"), [
    (MHAConfig(mask="padding", valid_len=3), "mask: padding"),
    (MHAConfig(mask="window", window=1), "mask: sliding window"),
    (MHAConfig(init="uniform"), "weights: uniform [0, 1)"),
    (MHAConfig(init="he"), "weights: He normal"),
    (MHAConfig(init="first"), "weights: hand-built: first-token (sink) head"),
    (MHAConfig(scale_rule="sqrt_t"), "scale: 1/√T"),
    (MHAConfig(scale_rule="temperature", temperature=2.0), "scale: 1/temperature"),
])
def test_the_summary_line_names_choices_by_their_short_labels(config, shown):
    line = summary_line(config)
    assert shown in line.split(" · ")
    assert "seed 0" not in line and "no peeking" not in line  # the widget's explanations stay in the widget


def test_the_summary_line_reads_the_short_label_from_the_settings_row(monkeypatch):
    import dataclasses

    import ui.state.settings as table

    rows = tuple(dataclasses.replace(row, short_choices={"causal": "no look-ahead"}) if row.name == "mask" else row
                 for row in table.SETTINGS)
    monkeypatch.setattr(table, "SETTINGS", rows)
    assert "mask: no look-ahead" in summary_line(MHAConfig(mask="causal")).split(" · ")
