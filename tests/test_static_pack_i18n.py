"""The static pack in a language (``--lang``, ``build_pack(lang=...)``, issue 37): its prose in zh-CN or es, no English
sentence of ``deploy/static_pack.py`` left, every number (the heatmaps' values, the tables) the same as in English, and
the default still English."""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import pytest

from deploy import static_pack
from tests.test_app_i18n_widgets import own_msgids, untranslated
from tests.test_static_pack import decode, page_data

APP = "https://mha.example.org"
LINES = [
    "http://127.0.0.1:8501/step_by_step?tokens=a+b+c+d&mask=causal&heads=2&d_model=8&null=1",
    "?tokens=a+b&heads=3&d_model=8",  # not built: the app would fall back
    "?tokens=the+cat+sat&pe=alibi&view=logits&head=1",  # kept for the live app: head=1
    "flash?tokens=a+b+c+d+e&tile=2&br=2&bc=2",
    "compare?tokens=a+b+c&d_model=8&heads=2&b_mask=causal",
    "lessons?lesson=causal",
    "lessons", "decoding?tokens=a+b", "about", "xyz?tokens=a", "?token=a+b", "not a link",  # refused, with reasons
    "?tokens=a+b&heads=3&d_model=8&mask=bogus&seed=x",  # refused with three reasons, joined as the language joins
]
PACK_MSGIDS = own_msgids(("deploy",), "static_pack.py")


@pytest.fixture(scope="module")
def packs(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for lang in ("en", "es", "zh-CN"):
        out[lang] = tmp_path_factory.mktemp(f"pack-{lang}") / "pack"
        static_pack.build_pack(out[lang], LINES, APP, lang=lang)
    return out


def visible_text(path: Path) -> list[str]:
    """The page's text as a reader sees it (tags and the figures' script removed), and its attributes' words."""
    page = path.read_text(encoding="utf-8")
    page = re.sub(r"<script>.*?</script>", " ", page, flags=re.S)
    words = re.findall(r"(?:aria-label|title)=\"([^\"]*)\"", page)
    text = html.unescape(re.sub(r"<[^>]+>", "\n", page))
    return [line.strip() for line in text.splitlines() if line.strip()] + words


@pytest.mark.parametrize("lang", ["es", "zh-CN"])
def test_the_pack_speaks_the_language_with_the_same_numbers(packs, lang):
    english, shown = packs["en"], packs[lang]
    files = sorted(p.name for p in english.glob("*.html"))
    assert files == sorted(p.name for p in shown.glob("*.html"))
    compared = 0
    for name in files:
        page = (shown / name).read_text(encoding="utf-8")
        assert f'<html lang="{lang}">' in page
        problems = untranslated(visible_text(shown / name), lang, PACK_MSGIDS)
        assert not problems, f"{lang} {name}: English left:\n" + "\n".join(map(repr, problems))
        if name == "index.html":
            continue
        before, after = page_data(english / name)["figures"], page_data(shown / name)["figures"]
        assert len(before) == len(after)  # a lesson of tables only (the tokens lesson) has none
        compared += len(before)
        for a, b in zip(before, after, strict=True):
            za, zb = [decode(t["z"]) for t in a["data"] if "z" in t], [decode(t["z"]) for t in b["data"] if "z" in t]
            assert len(za) == len(zb) and all(np.array_equal(x, y, equal_nan=True) for x, y in zip(za, zb, strict=True))
        tables_en = re.findall(r"<td>([-0-9.e]+)</td>", (english / name).read_text(encoding="utf-8"))
        assert tables_en == re.findall(r"<td>([-0-9.e]+)</td>", page)  # every table number, in order
    assert compared > 20  # the pack's figures were compared, not skipped


def test_refusals_and_chrome_in_spanish(packs):
    index = (packs["es"] / "index.html").read_text(encoding="utf-8")
    assert "Enlaces no generados" in index and "paquete de lecciones" in index
    assert "no es un enlace: escriba una dirección de la aplicación" in index
    assert "no se generan páginas de Decodificación" in index or "no se generan páginas de Decoding" in index
    flash = (packs["es"] / "link-4.html").read_text(encoding="utf-8")
    assert "Los pesos nunca se guardaron" in flash and "Abrir esta vista en la aplicación en vivo" in flash
    zh = (packs["zh-CN"] / "link-1.html").read_text(encoding="utf-8")
    assert "链接 1：逐步计算，头 0" in zh and "上一个面板" in zh


def test_the_default_is_english(packs, tmp_path):
    page = (packs["en"] / "index.html").read_text(encoding="utf-8")
    assert '<html lang="en">' in page and "Links not built" in page and not re.search("[\u4e00-\u9fff]", page)
    one = ["--lessons", "causal"]  # the option is what is checked here (every page in each language: above)
    assert static_pack.main([str(tmp_path / "bad"), "--lang", "en", *one]) == 0
    with pytest.raises(SystemExit):
        static_pack.main([str(tmp_path / "bad2"), "--lang", "xx", *one])
    assert static_pack.main([str(tmp_path / "zh"), "--lang", "zh-CN", *one]) == 0
    assert '<html lang="zh-CN">' in (tmp_path / "zh" / "index.html").read_text(encoding="utf-8")


def test_a_refusals_reasons_are_sentences_joined_as_the_language_writes_them(packs):
    """Three reasons for one line: a space between them in English and Spanish, none after "。" in Chinese."""
    line = html.escape(LINES[-1], quote=False)
    for lang, joint in (("en", ". `"), ("es", ". `"), ("zh-CN", "。`")):
        index = (packs[lang] / "index.html").read_text(encoding="utf-8")
        item = next(li for li in re.findall(r"<li>(.*?)</li>", index, re.S) if line in li)
        reasons = html.unescape(item.split("</code>", 1)[1])
        assert reasons.count(joint) == 2, (lang, reasons)
        assert ("。 " in reasons) is False
