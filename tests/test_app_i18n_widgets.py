"""The shared controls in zh-CN and es (issue 37): the sidebar, the presentation bar, the phone's table hint, the
upload messages and the link messages show the catalog's words, and every setting and number stays as in English.

"Untranslated" is checked against the msgids marked in the files these controls live in (``ui/widgets``,
``ui/state``, ``ui/run``): a shown text that holds one of them in English, where the catalog translates it, fails.
Strings of the engine's records (kernel, scheme and preset labels) are marked and translated elsewhere.
"""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import numpy as np
import pytest
from babel.messages.extract import extract_from_dir
from streamlit.testing.v1 import AppTest

from tests.address_bar import address
from tests.shown_charts import charts, decode
from tests.sidebar_controls import control, item_texts, set_control
from tests.test_uploads import npy_bytes
from ui.i18n import translations, using_language
from ui.widgets.controls import KEY as CONTROLS
from ui.widgets.uploads import parse_matrix

ROOT = Path(__file__).resolve().parents[1]
OWN = ("ui/widgets", "ui/state", "ui/run")
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2)}
LANGS = ("zh-CN", "es")
TEXT_FIELDS = ("label", "help", "body", "placeholder")
# Shown text that may hold an English msgid of these files, and why.
ALLOWED = {
    "MHA Explorer": "the app's name",
    "Heads": "the Heads page's own title (app_pages/heads.py: the pages are marked by another change); the sidebar's "
             "link to the page is checked, and translated",
}

# Links that draw most of the sidebar's branches: grouped heads, RoPE and its base, a temperature, the null key,
# padding; cross-attention with a causal mask, one-hot inputs, no W_O; a custom mask and its grid; presentation.
LINKS = {
    "grouped": {"tokens": "the cat sat on the mat", "d_model": "16", "heads": "4", "kv_heads": "2", "init": "uniform",
                "pe": "rope", "scale": "temperature", "temperature": "2", "null": "1", "mask": "padding",
                "valid_len": "4"},
    "cross": {"tokens": "a b a c", "kv_tokens": "x y z", "d_model": "8", "heads": "2", "mask": "causal",
              "emb": "onehot", "wo": "0", "init": "he"},
    "custom": {"tokens": "a b c", "d_model": "8", "heads": "2", "mask": "custom", "cmask": "100.110.111"},
    "present": {"tokens": "the cat sat on the mat again and again", "d_model": "8", "heads": "4", "kv_heads": "1",
                "mask": "window", "window": "2", "init": "normal", "scale": "sqrt_t", "wo": "0", "null": "1",
                "pe": "sinusoidal", "present": "1"},
}


def own_msgids(folders=OWN, files: str = "**.py") -> set[str]:
    """Every msgid (singular and plural) marked in ``files`` of ``folders`` (by default the controls' files)."""
    found = set()
    for folder in folders:
        for _file, _line, message, _comments, _context in extract_from_dir(
                str(ROOT / folder), keywords=KEYWORDS, method_map=[(files, "python")]):
            found.update(message if isinstance(message, tuple) else (message,))
    return found


MSGIDS = own_msgids()


def english_parts(lang: str, msgids: set[str] = MSGIDS) -> list[str]:
    """The English text of every msgid of these files that ``lang``'s catalog translates: the whole msgid when it
    has no placeholder, else each literal part between placeholders long enough to be words (8+ characters) that
    the translation does not keep as it is ("tokens, d_model ≤": token and d_model stay English by the glossary)."""
    catalog = translations(lang)
    parts = []
    for msgid in msgids:
        if catalog.gettext(msgid) == msgid and catalog.ngettext(msgid, msgid, 2) == msgid:
            continue  # the same in both languages (a symbol, a name) or a plural's other form
        literals = [lit for lit, *_rest in string.Formatter().parse(msgid)]
        if len(literals) == 1:
            parts.append(msgid)
        else:
            translated = catalog.gettext(msgid)
            parts += [lit.strip() for lit in literals
                      if len(lit.strip()) >= 8 and re.search("[a-z]{3}", lit) and lit.strip() not in translated]
    return parts


def shown_texts(node) -> list[str]:
    """Every label, help, body and option the element tree under ``node`` shows."""
    texts = []
    proto = getattr(node, "proto", None)
    if proto is not None:
        for name in TEXT_FIELDS:
            value = getattr(proto, name, None)
            if isinstance(value, str) and value:
                texts.append(value)
        texts += [option for option in getattr(proto, "options", []) if isinstance(option, str)]
        for block in ("popover", "expandable"):  # a block's own label (the presentation bar's popover)
            if block in proto.DESCRIPTOR.fields_by_name and proto.HasField(block):
                texts.append(getattr(proto, block).label)
        if getattr(node, "key", None) == CONTROLS:  # the settings' one element: its controls' texts are its data
            texts += [text for item in json.loads(proto.json)["items"] for text in item_texts(item)]
    for child in getattr(node, "children", {}).values():
        texts += shown_texts(child)
    return texts


def untranslated(texts: list[str], lang: str, msgids: set[str] = MSGIDS) -> list[tuple[str, str]]:
    """(English msgid text, where it is shown) for every English msgid of these files found in ``texts``."""
    parts = english_parts(lang, msgids)
    found = []
    for text in texts:
        if text in ALLOWED:
            continue
        for part in parts:
            whole = part == text or (len(part) >= 12 and part in text)
            if whole:
                found.append((part, text))
    return found


def open_app(params: dict, lang: str | None = None, phone: bool | None = None, monkeypatch=None,
             opened: tuple[str, ...] = ()) -> AppTest:
    """The app opened from a link with ``params`` (and ``lang``), its sections ``opened`` (their expanders' keys)
    open as a click leaves them."""
    if phone is not None:
        monkeypatch.setattr("ui.state.device.on_phone", lambda: phone)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for name, value in {**params, **({"lang": lang} if lang else {})}.items():
        at.query_params[name] = value
    for key in opened:
        at.session_state[key] = True
    at.run()
    assert not at.exception
    return at


def heatmap_values(at: AppTest) -> list[np.ndarray]:
    return [decode(trace["z"]) for figure in charts(at).values() for trace in figure["data"]
            if isinstance(trace.get("z"), dict) and "bdata" in trace["z"]]


def others(at: AppTest) -> dict:
    return {name: value for name, value in address(at).items() if name != "lang"}


def summary(at: AppTest) -> str:
    """The presentation bar's one-line summary of the settings."""
    return next(m.value for m in at.markdown if " · " in m.value and "**" in m.value)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("name", list(LINKS))
def test_the_controls_speak_the_language_and_keep_every_setting_and_number(once, name, lang):
    english = once(open_app, LINKS[name])
    shown = once(open_app, LINKS[name], lang)
    texts = shown_texts(shown._tree)
    problems = untranslated(texts, lang)
    assert not problems, f"{lang}, link {name}: English left on the page:\n" + "\n".join(map(repr, problems))
    assert shown.session_state.config == english.session_state.config
    assert others(shown) == others(english)
    numbers, before = heatmap_values(shown), heatmap_values(english)
    assert numbers and len(numbers) == len(before)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(numbers, before, strict=True))


def test_the_check_finds_english_left_in_a_page():
    """The detector itself: an English label, help or option of these files is found, a translated one is not."""
    with using_language("es"):
        assert untranslated(["Show controls"], "es") == [("Show controls", "Show controls")]
        assert untranslated(["Mostrar controles", "Notebook (.ipynb)"], "zh-CN") == []
        assert untranslated(["x: it is not a CSV of numbers (comma-separated, no header). y"], "es")


@pytest.mark.parametrize("lang, words", [
    ("es", ("Mostrar controles", "Presentando", "cabezas", "máscara:", "cabeza K/V", "clave nula", "sin W_O",
            "pesos:", "escala:", "posiciones:")),
    ("zh-CN", ("显示控件", "演示中", "个头", "掩码：", "个 K/V 头", "空键", "无 W_O", "权重：", "缩放：", "位置编码：")),
])
def test_the_presentation_bar_in_a_language_states_the_same_numbers(once, lang, words):
    english, shown = once(open_app, LINKS["present"]), once(open_app, LINKS["present"], lang)
    line = summary(shown)
    texts = [line, *shown_texts(shown._tree)]
    assert all(any(word in text for text in texts) for word in words), (words, line)
    assert re.findall(r"\d+", line) == re.findall(r"\d+", summary(english))  # the same counts, in the same order
    assert control(shown, "w_present").value and shown.session_state.config == english.session_state.config


def test_switching_language_keeps_translated_choices(monkeypatch):
    """A choice whose label is translated (init, scale, mask, embeddings) keeps its value through both switches."""
    at = open_app(LINKS["grouped"])
    before = at.session_state.config
    for lang in ("zh-CN", "es", "en"):
        at.selectbox(key="w_lang").set_value(lang).run()
        assert not at.exception and at.session_state.config == before
        assert control(at, "w_mask").value == "padding" and control(at, "w_init").value == "uniform"


def test_the_phone_hint_is_in_the_language(monkeypatch):
    diagnostics = ("diagnostics_open",)  # the table's section, drawn only while open
    at = open_app({}, "zh-CN", phone=True, monkeypatch=monkeypatch, opened=diagnostics)
    hints = [c.value for c in at.caption if c.value.startswith("↔")]
    assert len(hints) == 1 and hints[0].startswith("↔ 左右滑动表格查看全部") and "Swipe" not in hints[0]
    english = open_app({}, phone=True, monkeypatch=monkeypatch, opened=diagnostics)
    count = re.search(r"\d+", [c.value for c in english.caption if c.value.startswith("↔")][0]).group()
    assert f"全部 {count} 列" in hints[0]


@pytest.mark.parametrize("lang, heads_message, kv_message", [
    ("zh-CN", "链接：`heads=3` 不能整除 d_model 8（可选：1, 2, 4, 8）：改用 2。", "链接：`kv_heads=3` 不能整除 4 个头（可选：1, 2, 4）：改用 2。"),
    ("es", "Enlace: `heads=3` no divide d_model 8 (elija 1, 2, 4, 8): se usa 2.",
     "Enlace: `kv_heads=3` no divide 4 cabezas (elija 1, 2, 4): se usa 2."),
])
def test_a_bad_link_value_is_told_in_the_language_and_falls_back(once, lang, heads_message, kv_message):
    at = open_app({"d_model": "8", "heads": "3"}, lang)
    assert heads_message in [w.value for w in at.sidebar.warning]
    assert at.session_state.config.n_heads == 2
    at = open_app({"d_model": "8", "heads": "4", "kv_heads": "3"}, lang)
    assert kv_message in [w.value for w in at.sidebar.warning]
    assert at.session_state.config.key_value_heads == 2
    english = once(open_app, {"d_model": "8", "heads": "4", "kv_heads": "3"})  # the same fallback in English
    assert "Link: `kv_heads=3` does not divide 4 heads (choose 1, 2, 4): using 2." in [w.value for w in english.sidebar.warning]


@pytest.mark.parametrize("lang, label, refused, fallback", [
    ("es", "Matriz de embeddings (.csv o .npy)", "números complejos", "Se usan embeddings aleatorios con semilla."),
    ("zh-CN", "嵌入矩阵（.csv 或 .npy）", "复数", "改用带种子的随机嵌入。"),
])
def test_a_bad_upload_is_refused_in_the_language_and_falls_back(lang, label, refused, fallback):
    at = open_app({}, lang)
    set_control(at, "w_embedding", "custom")
    uploader = at.get("file_uploader")[0]
    assert uploader.proto.label == label
    uploader.set_value(("emb.npy", npy_bytes(np.full((6, 16), 1 + 1j)), "application/octet-stream"))
    at.run()
    assert not at.exception
    errors = " ".join(error.value for error in at.error)
    assert refused in errors and errors.endswith(fallback) and "Using seeded" not in errors, errors
    assert at.session_state["config"].embedding == "random"


def test_upload_reasons_follow_the_language_and_english_stays_the_default():
    bad = npy_bytes(np.array([[True, False]]))
    for lang, words in (("en", "true/false values"), ("es", "valores verdadero/falso"), ("zh-CN", "真/假值")):
        with using_language(lang), pytest.raises(ValueError, match=re.escape(words)):
            parse_matrix("b.npy", bad)
    with using_language("es"), pytest.raises(ValueError, match=r"el archivo tiene (.+?) bytes") as refused:
        parse_matrix("big.csv", b"1" * 1_000_001)
    size = re.search(r"tiene (.+?) bytes", str(refused.value)).group(1)
    assert size == "1\u202f000\u202f001" and int(size.replace("\u202f", "")) == 1_000_001  # Spanish grouping: narrow spaces
    with pytest.raises(ValueError, match="the file is 1,000,001 bytes; the limit is 1,000,000"):
        parse_matrix("big.csv", b"1" * 1_000_001)  # English unchanged
