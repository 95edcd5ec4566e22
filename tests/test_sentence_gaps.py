"""Sentences joined the way the reader's language writes them (ui.i18n.sentences).

Pages put two translated sentences side by side in one element (a caption and a second sentence, a step's "why"
and its mask note, a chart's alt text from one sentence per panel). English and Spanish put a space between them;
Chinese puts none: "。 " reads as a typo there. Every page is opened with a link that draws its joined texts
(Heads' caption under the figure and its "What each head does" paragraph, the step texts, the lessons' alt texts,
the sidebar's notes), in zh-CN, en and es, and what it shows is read: markdown, captions, alerts, help texts and
the charts' alt texts. zh-CN: no full-width punctuation followed by a space that no translation holds, and no bold
that Markdown leaves open ("**随机性。**没有" shows its stars). en and es: no sentence stop glued to the next
sentence's first word, and the joins that are known are shown with the catalog's own words and a space.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from pathlib import Path

import pytest
from babel.messages.pofile import read_po
from google.protobuf.json_format import MessageToDict
from streamlit.testing.v1 import AppTest

from mha_core.pretrained import ModelUnavailableError, load_minilm
from tests.shown_charts import chart_elements, settings_of
from ui.i18n import catalog_path, listing, sentences, translations, using_language

ROOT = Path(__file__).resolve().parents[1]
LANGS = ("zh-CN", "en", "es")
SENTENCE = "the cat sat on the mat"
# One link per page, each drawing the texts a join makes there.
PAGES = {
    "heads": ("app_pages/heads.py", {"tokens": SENTENCE, "heads": "2", "mask": "causal", "knock": "1"}),
    "heads_present": ("app_pages/heads.py", {"tokens": "the cat sat", "heads": "2", "present": "1", "avg": "1"}),
    "steps_gqa_linear": ("app_pages/step_by_step.py", {"heads": "4", "kv_heads": "2", "kernel": "linear",
                                                       "mask": "causal"}),
    "steps_gated_mla": ("app_pages/step_by_step.py", {"kernel": "gated", "mla_rank": "4", "pe": "rope"}),
    "steps_sink_cross": ("app_pages/step_by_step.py", {"kernel": "sink", "tokens": "the cat sat",
                                                       "kv_tokens": "a big dog ran", "mask": "causal"}),
    "compare": ("app_pages/compare.py", {"tokens": SENTENCE, "b_scale": "none"}),
    "flash": ("app_pages/flash.py", {"tokens": SENTENCE, "mask": "causal", "tile": "3"}),
    "seeds": ("app_pages/seeds.py", {}),
    "lessons": ("app_pages/lessons.py", {"lesson": "causal"}),
    "decoding": ("app_pages/decoding.py", {}),
    "about": ("app_pages/about.py", {}),
    "real_model": ("app_pages/real_model.py", {}),
}
TEXT_FIELDS = ("body", "label", "help", "placeholder")  # the keys of an element's proto whose words a reader sees
# Chinese punctuation that ends a sentence or clause, then a space: a join's, never the translator's (a closing bracket
# is left out: "（softmax） 的热力图" spaces a Latin word inside one sentence, as the catalog writes it; and a Markdown
# line break, two spaces and a newline, is no space between sentences).
SPACED = re.compile(r"[。，；：！？、]\** (?! *\n)")  # "。** ": the same after a bold sentence
# A sentence's last word (letters or digits, not a name's part after "." or "_"; or a closing bracket or bold) and its
# stop, with the next sentence's first word right after it ("sums to 1.Rows"): a join with no space. Code spans are taken out first (`nn.Module`).
GLUED = re.compile(r"(?:(?<![\w.])[^\W_]+|[)*])[.!?]\**(?=[A-ZÁÉÍÓÚÑ¿¡][a-záéíóúñ ])")
# In a chart's alt text (sentences of words, labels and numbers, no code) a panel's sentence starts in lower case
# ("head 1: ..."): any stop after a letter with a letter right after it is a join with no space.
ALT_GLUED = re.compile(r"(?<=[a-záéíóúñ)])[.!?](?=[a-záéíóúñ])")
CODE = re.compile(r"`[^`]*`")


@cache
def chinese_catalog() -> str:
    """Every translation of the zh-CN catalog, one text: where a translator wrote "。** " (a bold lead-in that
    Markdown closes only before a space) the space is the catalog's, not a join's."""
    with catalog_path("zh-CN").open("rb") as po:
        return "\n".join(text for message in read_po(po) if message.id
                         for text in ([message.string] if isinstance(message.string, str) else message.string))


def joined_here(text: str, match: re.Match) -> bool:
    """A spaced stop no translation holds with the three characters before it: two translations side by side."""
    return text[max(0, match.start() - 3):match.end()] not in chinese_catalog()


def unclosed_bold(text: str) -> list[str]:
    """Each bold span Markdown would not close: its ``**`` after punctuation with a letter right after it ("**随机性。**
    没有"), which CommonMark shows as two stars."""
    pieces = text.split("**")
    return [pieces[k][-8:] + "**" + pieces[k + 1][:8] for k in range(1, len(pieces) - 1, 2)
            if pieces[k] and unicodedata.category(pieces[k][-1]).startswith("P") and pieces[k + 1][:1].isalnum()]


def model_installed() -> bool:
    try:
        load_minilm()
    except ModelUnavailableError:
        return False
    return True


def open_page(page: str, lang: str) -> AppTest:
    path, params = PAGES[page]
    if page == "real_model" and not model_installed():
        pytest.skip("MiniLM's files are not installed (the Real model page needs them)")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for name, value in {**params, "lang": lang}.items():
        at.query_params[name] = value
    at.switch_page(path)
    if page == "heads":
        at.session_state["heads_describe"] = True  # the chart's words, written only while open
        at.session_state["diagnostics_open"] = True  # What each head does: its paragraph, drawn only while open
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def strings_under(value, field: str | None = None) -> list[str]:
    """The strings of a proto (as a dict) held under one of ``TEXT_FIELDS``."""
    if isinstance(value, str):
        return [value] if field in TEXT_FIELDS else []
    if isinstance(value, dict):
        return [s for key, v in value.items() for s in strings_under(v, key)]
    if isinstance(value, list):
        return [s for v in value for s in strings_under(v, field)]
    return []


def shown_words(at: AppTest) -> list[str]:
    """What the page gives a reader to read, main area and sidebar: markdown (a step, a paragraph), captions,
    alerts, labels and help texts, and each chart's alt text."""
    texts = []
    for root in (at.main, at.sidebar):
        for node in root:
            proto = getattr(node, "proto", None)
            if proto is not None and node.type not in ("plotly_chart", "arrow_data_frame", "code", "bidi_component"):
                texts += strings_under(MessageToDict(proto))
    return [t for t in texts if t] + alt_texts(at)


def alt_texts(at: AppTest) -> list[str]:
    """Each chart's alt text (what a screen reader reads for it)."""
    return [alt for alt in (settings_of(e).get("alt") for e in chart_elements(at)) if alt]


@pytest.fixture(scope="module")
def pages():
    opened = {}

    def page(name: str, lang: str) -> AppTest:
        if (name, lang) not in opened:
            opened[name, lang] = open_page(name, lang)
        return opened[name, lang]

    return page


def gettext(lang: str, msgid: str) -> str:
    """``msgid`` in ``lang`` straight from its catalog."""
    return translations(lang).gettext(msgid)


@pytest.mark.parametrize("page", list(PAGES))
def test_chinese_sentences_follow_each_other_with_no_space(pages, page):
    texts = shown_words(pages(page, "zh-CN"))
    assert any(re.search(r"[。：]", t) for t in texts), "the page shows Chinese prose"
    spaced = [(m.group(), t[max(0, m.start() - 25):m.end() + 25]) for t in texts for m in SPACED.finditer(t)
              if joined_here(t, m)]
    assert not spaced, f"{page} in zh-CN: a space after Chinese punctuation: {spaced}"
    unclosed = [bold for t in texts for bold in unclosed_bold(t)]
    assert not unclosed, f"{page} in zh-CN: bold that Markdown leaves open (its stars shown): {unclosed}"


@pytest.mark.parametrize("lang", ["en", "es"])
@pytest.mark.parametrize("page", list(PAGES))
def test_english_and_spanish_sentences_keep_their_space(pages, page, lang):
    texts = shown_words(pages(page, lang))
    glued = [t[max(0, m.start() - 25):m.end() + 25] for t in map(lambda t: CODE.sub("", t), texts)
             for m in GLUED.finditer(t)]
    glued += [t[max(0, m.start() - 25):m.end() + 25] for t in alt_texts(pages(page, lang)) for m in ALT_GLUED.finditer(t)]
    assert not glued, f"{page} in {lang}: two sentences with no space between them: {glued}"


DIAGNOSTICS = "Averages over the query rows (fully masked rows left out). Entropy 0 = sharp, 1 = even."
COSINE = "Cosine similarity of two heads' weight matrices: 1 = the same pattern."
W_O_TEXT = "W_O is the only step that mixes the heads: each output feature is a weighted sum of every head's columns."
ROWS_TEXT = "Rows = queries (the token that looks), columns = keys (the tokens looked at). "
QKV_WHY = ("Three learned matrices turn every token into a **query** (what it looks for), a **key** (what it offers "
           "to be found by) and a **value** (what it passes on).")
OUTLINED = "The outlined columns are head {head}'s."


@pytest.mark.parametrize("lang", LANGS)
def test_heads_paragraphs_join_their_sentences_with_the_languages_gap(pages, lang):
    """The diagnostics paragraph and the caption under the figure, each built here from the catalog's words."""
    gap = "" if lang == "zh-CN" else " "
    texts = shown_words(pages("heads", lang))
    paragraph = gettext(lang, DIAGNOSTICS) + gap + gettext(lang, COSINE)
    assert paragraph in texts
    w_o = gap + gettext(lang, W_O_TEXT)
    assert any(t.endswith(w_o) and t[: -len(w_o)].endswith(("。", ".")) for t in texts)
    rows = gettext(lang, ROWS_TEXT + "{heads} of size d_k = {hs}; hover a cell for its numbers.").split("{heads}")[0]
    caption = [t for t in texts if rows in t]
    assert len(caption) == 1
    assert caption[0][: caption[0].index(rows)].endswith("。" if lang == "zh-CN" else ". ")


@pytest.mark.parametrize("lang", LANGS)
def test_a_steps_text_joins_its_sentences_with_the_languages_gap(pages, lang):
    gap = "" if lang == "zh-CN" else " "
    texts = shown_words(pages("steps_gqa_linear", lang))
    joined = gettext(lang, QKV_WHY) + gap + gettext(lang, OUTLINED).format(head=0)
    assert any(joined in t for t in texts), joined


def test_the_joiner_drops_empty_parts_and_keeps_bold_closed_in_chinese():
    assert sentences("A.", "", "B.") == "A. B."
    with using_language("es"):
        assert sentences("Uno.", "Dos.") == "Uno. Dos."
    with using_language("zh-CN"):
        assert sentences("一。", "", "二。") == "一。二。"
        assert sentences("**随机性。**", "没有种子。") == "**随机性**。没有种子。"  # else Markdown shows the stars
        assert sentences("**粗体**结尾。", "下一句。") == "**粗体**结尾。下一句。"
    assert sentences() == ""


@pytest.mark.parametrize("lang, gap", [("en", ", "), ("es", ", "), ("zh-CN", "、")])
def test_the_seeds_explorer_line_lists_its_phrases_as_the_language_does(pages, lang, gap):
    """Seed notebooks' "In the explorer" line: its settings separated by ", " in English and Spanish, by "、" in
    Chinese: eight phrases, "d_model N" (the same in every language) one of them."""
    lead = gettext(lang, "**In the explorer:** {summary}.").split("{summary}")[0]
    lines = [t for t in shown_words(pages("seeds", lang)) if t.startswith(lead)]
    assert lines  # one per seed document whose layer the explorer can express
    for line in lines:
        phrases = line[len(lead):].rstrip(".。").split(gap)
        assert len(phrases) == 8, phrases
        assert any(re.fullmatch(r"d_model \d+", p) for p in phrases), phrases
        if gap != ", ":
            assert ", " not in line


def test_the_list_joiner_separates_phrases_as_the_language_does():
    assert listing(["4 heads", "", "no biases"]) == "4 heads, no biases"
    with using_language("zh-CN"):
        assert listing(["4 个头", "无偏置"]) == "4 个头、无偏置"
