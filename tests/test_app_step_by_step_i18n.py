"""Step by step in Simplified Chinese and Spanish: every word of the pipeline's files translated, every number kept.

For each variant of the pipeline (softmax, differential, linear, MLA, RoPE with shared K/V, ALiBi with the null key,
a causal mask, cross-attention) the page is opened in English, ``?lang=zh-CN`` and ``?lang=es`` with the drill-down
open. In the two other languages:

- every step title differs from its English one, and no English msgid of the files this covers (``ui/pipeline``,
  ``ui/widgets/step_views.py``, ``app_pages/step_by_step.py``) is left in the page's main area: each msgid is cut
  at its placeholders and Markdown marks, and any piece of two or more English words must not be shown;
- the anchors ("Jump to" links, the steps' headings) are the English page's: a link to ``#scores`` works in every
  language;
- every number is the English page's: each chart's arrays, each table's values, the numbers in each formula.

A step's CSV download keeps its arrays in every language (only the matrices' titles change).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from babel.messages.extract import extract_from_file
from streamlit.testing.v1 import AppTest

from mha_core.config import MHAConfig, run
from mha_core.kernels import KERNELS
from mha_core.positions import SCHEMES, SchemeAt
from tests.shown_charts import charts, decode
from tests.shown_steps import open_downloads, step_anchors, step_formulas, step_titles
from tests.sidebar_controls import control
from ui.i18n import using_language
from ui.pipeline.step_export import run_step_frame

ROOT = Path(__file__).resolve().parents[1]
PAGE = "app_pages/step_by_step.py"
LANGS = ("zh-CN", "es")
OWN_FILES = sorted((ROOT / "ui" / "pipeline").glob("*.py")) + [ROOT / "ui" / "widgets" / "step_views.py",
                                                               ROOT / "app_pages" / "step_by_step.py"]
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2)}

# The variants of the pipeline, each a link (the drill-down opens on a cell other than (0, 0)).
VARIANTS = {
    "softmax": {"qi": "1", "kj": "2"},
    "differential": {"kernel": "differential", "qi": "1", "kj": "0"},
    "linear": {"kernel": "linear", "mask": "causal"},
    "mla": {"mla_rank": "4", "pe": "rope", "qi": "1", "kj": "1"},
    "rope_shared_kv": {"pe": "rope", "kv_heads": "1", "qi": "2", "kj": "1"},
    "alibi_null_key": {"pe": "alibi", "null": "1", "qi": "2", "kj": "0"},
    "causal": {"mask": "causal", "qi": "1", "kj": "2"},
    "cross": {"tokens": "the cat sat", "kv_tokens": "a big dog ran", "qi": "1", "kj": "3"},
    "predict": {"mask": "causal", "qi": "2", "kj": "1"},  # predict-then-reveal on, the guess revealed
}
PREDICT = "predict"

# English pieces of our msgids that may stand in a translated page, with the reason.
ALLOWED = {
    ": (T tokens, C = d_model)",  # a shape's names: Spanish keeps "tokens" (README glossary) and the symbols
    ": (tokens, d_model)",  # the same, for cross-attention's two sentences
}

# Step titles that come from the engine's records (a positional scheme's title): mha_core marks them with N_ and its
# catalog entries come with that marking; until they exist the page shows them in English.
ENGINE_TITLES = {scheme.title() for scheme in SCHEMES.values()}

# Texts other files give the page, left to the helpers that mark those files (each a prefix of the shown text):
# the engine's records (a scheme's "why", a kernel's words; mha_core marks them with N_), the heatmaps' hover
# template (ui/charts) and the notebook button (ui/widgets/notebook_button.py).
OTHERS_TEXTS = (
    tuple(scheme.why(SchemeAt(0, 4, 4))[:30] for scheme in SCHEMES.values() if scheme.why is not None)
    + tuple(text for kernel in KERNELS.values() for text in vars(kernel).values() if isinstance(text, str) and text)
    + ("row %{y}<br>column %{x}", "Notebook (.ipynb)", "$$")  # "$$": a formula; its \text words are msgids above
)

ENGLISH_WORD = re.compile(r"(?<![\w])[A-Za-z]{3,}(?![\w])")  # a word, not part of a name (head_0, λ_init)
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def own_msgids() -> list[str]:
    """Every msgid (singular and plural) marked in the files this test covers."""
    found = []
    for path in OWN_FILES:
        for _line, message, _comments, _context in extract_from_file("python", str(path), keywords=KEYWORDS):
            found += list(message) if isinstance(message, tuple) else [message]
    return found


def english_pieces(msgid: str) -> list[str]:
    """The parts of ``msgid`` between its placeholders, Markdown marks and code spans that hold two or more English
    words: text a reader would recognise as the untranslated msgid."""
    parts = re.split(r"\{[^}]*\}|\*\*|`[^`]*`|\*", msgid)
    return [p.strip() for p in parts if len(ENGLISH_WORD.findall(p)) >= 2 and p.strip() not in ALLOWED]


PIECES = sorted({piece for msgid in own_msgids() for piece in english_pieces(msgid)})


def open_page(lang: str, params: dict) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in {**params, "lang": lang}.items():
        at.query_params[name] = value
    at.switch_page(PAGE).run()
    at.session_state["sbs_masked_policy"] = True  # the sections drawn only while open: their words are checked too
    with using_language(lang):  # AppTest sends a selectbox's value back through the page's format_func, in this thread
        open_downloads(at)
    if params is VARIANTS[PREDICT]:
        with using_language(lang):
            control(at, "w_sbs_predict").set_value(True).run()
            at.button(key="sbs_reveal").click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def chart_words(figure: dict) -> list[str]:
    layout = figure.get("layout", {})
    words = [a.get("text", "") for a in layout.get("annotations", [])]
    words += [str(layout.get("title", {}).get("text", ""))]
    for name, axis in layout.items():
        if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            words.append(str(axis.get("title", {}).get("text", "")))
    words += [str(trace.get("hovertemplate", "")) for trace in figure.get("data", [])]
    return words


def shown_texts(at: AppTest) -> list[str]:
    """Every text of the page's main area: prose, headings, formulas, labels, table headers, chart words."""
    main = at.main
    texts = [e.value for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning", "success",
                                  "latex") for e in getattr(main, kind)]
    texts += [e.label for kind in ("expander", "selectbox", "toggle", "button") for e in getattr(main, kind)]
    texts += [str(o) for s in main.selectbox for o in s.options]
    texts += [e.proto.label for e in main.get("download_button")]
    texts += [e.proto.help for e in main.toggle if e.proto.help]
    for frame in (d.value for d in main.dataframe):
        texts += [str(c) for c in frame.columns] + [str(n) for n in frame.index.names if n]
        texts += [str(v) for v in frame.index] + [str(v) for v in frame.select_dtypes("object").to_numpy().ravel()]
    texts += [word for figure in charts(at).values() for word in chart_words(figure)]
    return texts


def numbers_shown(at: AppTest) -> dict[str, list]:
    """Every number the page shows, by where: the charts' arrays, the tables' values, the formulas' numbers."""
    arrays = [decode(value) for figure in charts(at).values() for trace in figure["data"]
              for value in (trace.get("z"), trace.get("x"), trace.get("y"))
              if isinstance(value, dict) and "bdata" in value]
    tables = [d.value.select_dtypes(exclude="object").to_numpy() for d in at.main.dataframe]
    formulas = [NUMBER.findall(f) for f in step_formulas(at)] + [NUMBER.findall(e.value) for e in at.main.latex]
    return {"charts": arrays, "tables": tables, "formulas": formulas}


def anchors(at: AppTest) -> list[str]:
    jump = next(m.value for m in at.main.markdown if "](#drill-down)" in m.value)
    return re.findall(r"\]\(#([\w-]+)\)", jump) + step_anchors(at)


@pytest.fixture(scope="module")
def pages() -> dict[tuple[str, str], AppTest]:
    return {(variant, lang): open_page(lang, params) for variant, params in VARIANTS.items()
            for lang in ("en", *LANGS)}


def test_the_prediction_is_revealed_in_each_language(pages):
    for lang in ("en", *LANGS):
        at = pages[PREDICT, lang]
        assert control(at, "w_sbs_predict").value and (at.success or at.warning)
    assert pages[PREDICT, "es"].main.selectbox(key="w_guess_k").label == "Su apuesta (clave)"


def test_a_notebook_in_a_language_keeps_its_code():
    from ui.pipeline.notebook import build_notebook

    result = run(MHAConfig(mask="causal", pe="rope"))
    english = build_notebook(result, "http://localhost/step_by_step")
    with using_language("es"):
        spanish = build_notebook(result, "http://localhost/step_by_step")
    def code(cell) -> str | bool:  # a code cell's code, its whole-line comments (translated prose) left out
        return cell.cell_type == "code" and "\n".join(
            line for line in cell.source.splitlines() if not line.lstrip().startswith("#"))

    kinds = [(c.cell_type, code(c)) for c in english.cells]
    assert kinds == [(c.cell_type, code(c)) for c in spanish.cells]
    prose = [(a.source, b.source) for a, b in zip(english.cells, spanish.cells, strict=True) if a.cell_type == "markdown"]
    assert all(a != b for a, b in prose), [a for a, b in prose if a == b]
    assert "Atención multicabeza en NumPy puro" in spanish.cells[0].source


def test_the_pieces_are_many_and_english():
    assert len(PIECES) > 150 and "Rotate queries and keys by position (RoPE)" in PIECES


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_step_title_is_translated(pages, variant, lang):
    english = step_titles(pages[variant, "en"])
    shown = step_titles(pages[variant, lang])
    assert len(shown) == len(english) >= 10
    same = [title for title, other in zip(shown, english, strict=True)
            if title == other and title.split(". ", 1)[1] not in ENGINE_TITLES]
    assert not same, f"untranslated step titles in {lang}: {same}"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_no_english_of_the_pipeline_is_left(pages, variant, lang):
    texts = shown_texts(pages[variant, lang])
    left = sorted({piece for piece in PIECES for text in texts if piece in text})
    assert not left, f"English left on Step by step ({variant}, {lang}): {left}"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_no_text_is_left_as_in_english(pages, variant, lang):
    """A text shown word for word as on the English page (a sentence nobody marked) must come from another file."""
    english = set(shown_texts(pages[variant, "en"]))
    same = {text for text in shown_texts(pages[variant, lang]) if text in english and len(ENGLISH_WORD.findall(text)) >= 2}
    unnumbered = {text: re.sub(r"^\d+\. ", "", text) for text in same}  # a step title without its number
    left = sorted(text for text, words in unnumbered.items()
                  if not words.startswith(OTHERS_TEXTS) and words not in ENGINE_TITLES)
    assert not left, f"shown in English on Step by step ({variant}, {lang}): {left}"


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_anchors_and_numbers_are_the_english_pages(pages, variant, lang):
    english, shown = pages[variant, "en"], pages[variant, lang]
    assert anchors(shown) == anchors(english) and len(anchors(english)) >= 20  # the links and the headings
    want, got = numbers_shown(english), numbers_shown(shown)
    assert len(got["charts"]) == len(want["charts"]) >= 8
    for a, b in zip(got["charts"], want["charts"], strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(got["tables"]) == len(want["tables"])
    for a, b in zip(got["tables"], want["tables"], strict=True):
        np.testing.assert_array_equal(a, b)
    assert got["formulas"] == want["formulas"] and sum(map(len, want["formulas"])) > 10
    buttons = [b.proto.id.rsplit("-", 1)[-1] for b in shown.main.get("download_button")]  # the section, opened
    assert buttons == [b.proto.id.rsplit("-", 1)[-1] for b in english.main.get("download_button")]
    assert "sbs_dl_npz" in buttons and len(buttons) >= 9


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("slug", ["qkv", "scores", "mask", "softmax"])
def test_a_steps_download_keeps_its_arrays(lang, slug):
    result = run(MHAConfig(mask="causal"))
    english = run_step_frame(result, 1, slug)
    with using_language(lang):
        shown = run_step_frame(result, 1, slug)
    np.testing.assert_array_equal(shown.to_numpy(), english.to_numpy())
    assert list(shown.columns) == list(english.columns)
    titles, english_titles = shown.index.get_level_values(0).unique(), english.index.get_level_values(0).unique()
    assert len(titles) == len(english_titles) and set(titles) != set(english_titles)  # the matrices' names translated
    if slug == "scores":
        np.testing.assert_array_equal(shown.to_numpy(dtype=float), result.trace.scores[1])
