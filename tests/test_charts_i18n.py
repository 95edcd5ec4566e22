"""ui/charts in Chinese and Spanish: the words are the catalog's, the numbers are the engine's, as in English.

The expected words are read from the ``.po`` files themselves (babel's reader), never through ``_``; the numbers
are compared with the English figure's and with the engine's arrays. The figure caches key on the language: a
figure built in one language is not served in another.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from babel.messages.pofile import read_po
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from mha_core.kernels import attention_kernel
from tests.shown_charts import chart_elements, decode, figure_of, key_of, settings_of
from ui.charts import describe, export, figures, head_panels, kernels, tables
from ui.i18n import catalog_path, using_language
from ui.i18n.languages import LANGUAGES

ROOT = Path(__file__).resolve().parents[1]
TRANSLATED = ["zh-CN", "es"]
RESULT = run(MHAConfig(mask="causal"))
NUMBER = re.compile(r"−?-?\d+(?:\.\d+)?")


def numbers(text: str) -> list[str]:
    """The numbers a sentence says, in sorted order (a token label's position counts too)."""
    return sorted(NUMBER.findall(text))


def catalog(code: str) -> dict:
    """msgid -> msgstr of a language, read from its .po file."""
    with catalog_path(code).open("rb") as po:
        return {m.id: m.string for m in read_po(po, locale=LANGUAGES[code].locale) if m.id}


CATALOGS = {code: catalog(code) for code in TRANSLATED}


def charts_msgids() -> set[str]:
    """Every single msgid marked in ui/charts (the template's locations), whose translation differs from it."""
    with (ROOT / "ui" / "i18n" / "messages.pot").open("rb") as pot:
        entries = [m for m in read_po(pot) if m.id and isinstance(m.id, str)]
    return {m.id for m in entries if any(path.startswith("ui/charts/") for path, _line in m.locations)}


CHARTS_MSGIDS = charts_msgids()


def words_of(spec: dict) -> list[str]:
    """Every text a reader sees in a figure: titles (figure, axes, colour bars), annotations, hover templates."""
    found = []

    def walk(node, key=""):
        if isinstance(node, dict):
            for name, value in node.items():
                walk(value, name)
        elif isinstance(node, list):
            for item in node:
                walk(item, key)
        elif isinstance(node, str) and key in ("text", "hovertemplate", "ticktext"):
            found.append(node)

    walk({"data": spec["data"], "layout": {k: v for k, v in spec["layout"].items() if k != "template"}})
    return found


def grid(lang: str, **options) -> dict:
    with using_language(lang):
        return figures.attention_grid(RESULT.trace.weights, RESULT.query_labels, RESULT.key_labels,
                                      mask=RESULT.mask, **options).to_dict()


@pytest.mark.parametrize("lang", TRANSLATED)
@pytest.mark.parametrize("colour_range", ["fixed", "max", "head"])
def test_an_attention_grid_has_the_catalogs_words_and_the_english_numbers(lang, colour_range):
    words = CATALOGS[lang]
    english, shown = grid("en", colour_range=colour_range), grid(lang, colour_range=colour_range)
    layout = shown["layout"]
    assert layout["xaxis"]["title"]["text"] == words["key (looked at) →"]
    assert layout["yaxis"]["title"]["text"] == words["query (looking) ↓"]
    heads = [words["head {h}"].format(h=h) for h in range(RESULT.trace.n_heads)]
    assert [a["text"][: len(head)] for a, head in zip(layout["annotations"], heads, strict=True)] == heads
    bar = layout["coloraxis"]["colorbar"]["title"]["text"]
    assert bar.startswith(words["weight"]) and bar != english["layout"]["coloraxis"]["colorbar"]["title"]["text"]
    hover = shown["data"][0]["hovertemplate"]
    assert hover.startswith(f"{words['query']} %{{y}}<br>{words['key']} %{{x}}<br>{words['weight']} %{{z:.4f}}")
    masked_hover = next(t["hovertemplate"] for t in shown["data"] if "coloraxis" not in t)
    assert words["masked (−∞ → weight 0)"] in masked_hover
    # The numbers: every panel is the engine's, exactly as in English; the colour bars' numbers are English's.
    for panel, shown_trace, english_trace in zip(RESULT.trace.weights, shown["data"], english["data"], strict=False):
        np.testing.assert_array_equal(decode(shown_trace["z"]), decode(english_trace["z"]))
        np.testing.assert_allclose(np.nan_to_num(decode(shown_trace["z"])), np.where(RESULT.mask, panel, 0), atol=1e-6)
    assert NUMBER.findall(bar) == NUMBER.findall(english["layout"]["coloraxis"]["colorbar"]["title"]["text"])
    assert [a["text"] for a in layout["annotations"]] != [a["text"] for a in english["layout"]["annotations"]]
    assert [NUMBER.findall(a["text"]) for a in layout["annotations"]] == [
        NUMBER.findall(a["text"]) for a in english["layout"]["annotations"]]


@pytest.mark.parametrize("lang", TRANSLATED)
def test_no_english_word_of_ui_charts_is_left_in_a_translated_figure(lang):
    """Every text of the figures ui/charts builds, cut at the plotly markup, is no msgid of ui/charts that the
    language translates differently: a title a builder forgot to mark would be English here."""
    different = {msgid for msgid in CHARTS_MSGIDS if CATALOGS[lang].get(msgid) not in (None, "", msgid)}
    with using_language(lang):
        averaged, titles = figures.with_average(RESULT.trace.weights)
        built = [
            figures.attention_grid(RESULT.trace.logits, RESULT.query_labels, RESULT.key_labels, kind="logits"),
            figures.attention_grid(averaged, RESULT.query_labels, RESULT.key_labels, titles=titles,
                                   colour_range="head"),
            figures.concat_heatmap(RESULT.trace.concat, RESULT.query_labels, RESULT.trace.n_heads),
            figures.similarity_heatmap(tables.similarity_frame(RESULT.trace).to_numpy()),
            figures.matrix_heatmap(RESULT.trace.output, RESULT.query_labels, [str(i) for i in range(16)]),
        ]
    pieces = set()
    for figure in built:
        for text in words_of(figure.to_dict()):
            for piece in re.split(r"<br>|<extra>|</extra>|%\{[^}]*\}", text):
                pieces.add(piece.strip())
    left = sorted(pieces & different)
    assert not left, f"{lang}: English words left in the figures: {left}"


def test_an_empty_row_name_stays_empty_not_the_catalogs_header():
    """gettext's "" is the catalog's header: an empty row name stays empty in every language."""
    with using_language("es"):
        trace, _layout = figures.matrix_heatmap_parts(np.eye(2), ["a", "b"], ["c", "d"], row_name="")
    assert trace["hovertemplate"].startswith("%{y}<br>")


@pytest.mark.parametrize("lang", TRANSLATED)
def test_the_alt_texts_are_translated_and_say_the_same_numbers(lang):
    words = CATALOGS[lang]
    trace = RESULT.trace
    similarity = tables.similarity_frame(trace).to_numpy()

    def texts():
        return [
            *describe.grid_lines(trace.weights, RESULT.query_labels, RESULT.key_labels, mask=RESULT.mask),
            *describe.grid_lines(trace.logits, RESULT.query_labels, RESULT.key_labels, kind="logits"),
            describe.describe_concat(trace.concat, RESULT.query_labels, trace.n_heads),
            describe.describe_mask(RESULT.mask, RESULT.query_labels, RESULT.key_labels),
            describe.describe_similarity(similarity),
            describe.describe_matrix(trace.output, RESULT.query_labels, [str(i) for i in range(16)],
                                     row_name="query", col_name="feature"),
        ]

    english = texts()
    with using_language(lang):
        shown = texts()
    for mine, theirs in zip(shown, english, strict=True):
        assert mine != theirs
        assert numbers(mine) == numbers(theirs), (mine, theirs)  # a language may say them in another order
    assert words["dark = small, bright = large"] in shown[0]
    assert words[("{n} panel", "{n} panels")][-1].format(n=trace.n_heads) in shown[0]
    assert words["causal: each query sees itself and the tokens before it"] in shown[-3]
    assert words["{n} features"].format(n=16) in shown[-1]
    assert not any(msgid in text for text in shown for msgid in ("each query", "strongest", "heatmap", "masked"))


@pytest.mark.parametrize("lang", TRANSLATED)
def test_captions_and_table_words_are_translated(lang):
    words = CATALOGS[lang]
    with using_language(lang):
        caption = head_panels.view_caption(RESULT.trace, "weights", "fixed", "per head")
        summary = tables.head_summary_frame(RESULT.trace)
        meanings = tables.diagnostic_columns(RESULT.trace)
        titles = head_panels.panel_titles(RESULT.trace, "weights")
    assert words["Each row sums to 1."] in caption
    assert words["A bright cell is a large weight, not an 'important word'."] in caption
    assert caption.startswith(words["Colour = attention weight: how much of each key's value goes into the query's "
                                    "output. {row_sums} {bright} Grey cells are masked: weight exactly 0."][:6])
    assert titles == [words["head {h}"].format(h=h) for h in range(RESULT.trace.n_heads)]
    assert list(summary.index) == titles
    np.testing.assert_array_equal(summary.to_numpy(), tables.head_summary_frame(RESULT.trace).to_numpy())
    assert list(summary.columns) == list(tables.head_summary_frame(RESULT.trace).columns)  # the keys stay English
    assert meanings["entropy"] == ("entropy", words["0 = each row puts all its weight on one key, 1 = spread evenly "
                                                     "over the keys it may see"])


@pytest.mark.parametrize("lang", TRANSLATED)
def test_the_exports_readme_is_translated_and_its_arrays_are_the_same(lang):
    english = json.loads(export.json_bytes(RESULT))
    with using_language(lang):
        shown = json.loads(export.json_bytes(RESULT))
        npz = export.npz_bytes(RESULT)
    assert shown["README"] == CATALOGS[lang][export.JSON_README] != english["README"]
    assert shown["arrays"] == english["arrays"] and shown["shapes"] == english["shapes"]
    assert npz == export.npz_bytes(RESULT)  # the .npz has no words: the same bytes in every language


def test_a_cached_figure_is_never_served_in_another_language():
    from ui.run import cached_figures

    arguments = (RESULT.trace.weights, RESULT.query_labels, RESULT.key_labels)
    with using_language("es"):
        spanish = cached_figures.attention_grid(*arguments, mask=RESULT.mask).to_dict()
        spanish_again = cached_figures.attention_grid(*arguments, mask=RESULT.mask)
    with using_language("zh-CN"):
        chinese = cached_figures.attention_grid(*arguments, mask=RESULT.mask).to_dict()
    assert spanish_again.to_dict() is spanish  # the same language: the cached figure itself
    assert chinese["layout"]["xaxis"]["title"]["text"] == CATALOGS["zh-CN"]["key (looked at) →"]
    assert spanish["layout"]["xaxis"]["title"]["text"] == CATALOGS["es"]["key (looked at) →"]
    for es_trace, zh_trace in zip(spanish["data"], chinese["data"], strict=True):
        assert es_trace["z"] == zh_trace["z"]  # the very same bytes


@pytest.mark.parametrize("lang", TRANSLATED)
def test_the_heads_page_draws_its_charts_and_alt_texts_in_the_language(lang):
    """Heads through AppTest with ``?lang=``: the grid's words are the catalog's, its numbers the English page's."""
    pages = {}
    for code in ("en", lang):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
        at.query_params["lang"] = code
        at.run()
        assert not at.exception
        pages[code] = {key_of(e): (figure_of(e), settings_of(e)) for e in chart_elements(at)}
    english, shown = pages["en"], pages[lang]
    assert english.keys() == shown.keys() and "heads_grid" in shown
    figure, settings = shown["heads_grid"]
    assert figure["layout"]["xaxis"]["title"]["text"] == CATALOGS[lang]["key (looked at) →"]
    alt, english_alt = settings["alt"], english["heads_grid"][1]["alt"]
    assert CATALOGS[lang]["dark = small, bright = large"] in alt and "dark = small" not in alt
    assert numbers(alt) == numbers(english_alt)
    weights = run(MHAConfig()).trace.weights
    for key, (english_figure, _settings) in english.items():
        for mine, theirs in zip(shown[key][0]["data"], english_figure["data"], strict=True):
            if isinstance(theirs.get("z"), dict):
                np.testing.assert_array_equal(decode(mine["z"]), decode(theirs["z"]))
    for panel, trace in zip(weights, figure["data"], strict=False):
        np.testing.assert_allclose(decode(trace["z"]), panel, atol=1e-6)


@pytest.mark.parametrize("lang", TRANSLATED)
def test_a_differential_kernels_sentences_are_translated_with_this_runs_numbers(lang):
    trace = run(MHAConfig(kernel="differential", mask="causal")).trace
    english = (kernels.row_sums_sentence(trace), tables.diagnostics_caption(trace))
    with using_language(lang):
        shown = (kernels.row_sums_sentence(trace), tables.diagnostics_caption(trace))
        rows = kernels.kernel_rows()
        columns = kernels.kernel_columns()
    total = f"{attention_kernel('differential').row_sum(trace.kernel_parts):.3f}"  # 1 − λ of this run
    for mine, theirs in zip(shown, english, strict=True):
        assert mine != theirs and total in mine and set(numbers(theirs)) <= set(numbers(mine))
    assert "not 1" not in shown[0] and "each row sums" not in shown[1]
    assert columns[0] == "kernel" and columns[1:] == [CATALOGS[lang][name] for name in kernels.KERNEL_COLUMNS[1:]]
    assert rows[-1][1] == CATALOGS[lang]["multi-head latent attention (MLA)"]
    assert [row[0] for row in rows] == [row[0] for row in kernels.kernel_rows()]  # the kernels' names stay


def without_comments(source: str) -> list[str]:
    """A code cell's lines with its whole-line comments left out (the prose; the code and the asserts remain)."""
    return [line for line in source.splitlines() if not line.lstrip().startswith("#")]


@pytest.mark.parametrize("kernel", ["softmax", "differential"])
def test_the_notebooks_comments_are_translated_and_it_still_runs(kernel, tmp_path):
    from tests.test_notebook import execute
    from ui.pipeline.notebook import notebook_for_config

    config = MHAConfig(kernel=kernel, mask="causal", kv_heads=2)
    english = notebook_for_config(config, "http://localhost:8501/")
    with using_language("es"):
        spanish = notebook_for_config(config, "http://localhost:8501/")
    code = [(mine.source, theirs.source) for mine, theirs in zip(spanish.cells, english.cells, strict=True)
            if mine.cell_type == "code"]
    assert all(without_comments(mine) == without_comments(theirs) for mine, theirs in code)  # the same code
    comments = " ".join(line[2:] for mine, _theirs in code for line in mine.splitlines() if line.startswith("# "))
    words = CATALOGS["es"]
    assert words["head h owns columns h*hs:(h+1)*hs"] in comments
    assert words["query head h reads key/value head h // (nh / kv): one K/V head per group of query heads"] in comments
    if kernel == "differential":
        assert words["Each head's q and k in two halves of h2 = hs/2 features: two softmax maps per head"] in comments
    assert "owns columns" not in comments and "Each head's q" not in comments
    execute(spanish, tmp_path)
    outputs = [o for cell in spanish.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
