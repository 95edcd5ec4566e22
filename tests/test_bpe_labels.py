"""Token labels of every script: SmolLM2's byte-level tokens round-trip to the prompt, and each label is the
token's exact text or marks a character the token holds only in part; MiniLM's WordPiece chips show '##'
pieces and [UNK] as the tokenizer writes them, with the text they stand for on hover.

The expected characters come from Python's own UTF-8 codec and ``unicodedata``, never from the labeller.
"""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mha_core.bpe import PIECE_SLASH, join_token_bytes, label_tokens, piece_mark
from ui.pages.real_model import piece_chips_html
from ui.pages.real_model.smollm2 import axis_labels, shown_token, token_chips_html, token_hovers

SUPER = "⁰¹²³⁴⁵⁶⁷⁸⁹"
SUB = "₀₁₂₃₄₅₆₇₈₉"
MARK = re.compile(f"(.)([{SUPER}]+){PIECE_SLASH}([{SUB}]+)", re.S)

PROMPTS = {
    "cjk": "注意力是什么？",
    "cjk and emoji": "注意力是什么？🙂",
    "zwj family": "👨‍👩‍👧 and 🧑🏽‍💻",
    "flags": "🇪🇸🇨🇳🇺🇸",
    "accented nfc": unicodedata.normalize("NFC", "café naïve São Paulo"),
    "accented nfd": unicodedata.normalize("NFD", "café naïve São Paulo"),
    "mixed scripts": "Attention — 注意力 — atención — внимание — انتباه — ध्यान 🙂",
    "control token": "<|im_start|>user\n東京<|im_end|>",
}


def check_labels(text: str, pieces: list[bytes]) -> None:
    """The pieces join to ``text``; each label is its token's exact text, or names every character the token
    holds: a whole one as itself, one cut over n tokens as "<char><k>⁄<n>" in the k-th of them."""
    assert join_token_bytes(pieces) == text
    labels = label_tokens(pieces)
    assert [label.data for label in labels] == pieces
    spans, position = [], 0  # each character's bytes [start, stop) in the UTF-8 stream, by Python's codec
    for char in text:
        spans.append((char, position, position + len(char.encode("utf-8"))))
        position = spans[-1][2]
    stops = [0]
    for piece in pieces:
        stops.append(stops[-1] + len(piece))
    expected = [""] * len(pieces)
    for char, start, stop in spans:
        holders = [t for t in range(len(pieces)) if stops[t] < stop and stops[t + 1] > start]
        for number, holder in enumerate(holders, start=1):
            expected[holder] += char if len(holders) == 1 else f"{char}{sup(number)}{PIECE_SLASH}{sub(len(holders))}"
    for index, (piece, label) in enumerate(zip(pieces, labels, strict=True)):
        try:
            exact = piece.decode("utf-8")
        except UnicodeDecodeError:
            exact = None
        whole = exact is not None and expected[index] == exact
        assert label.whole == whole, (index, label)
        assert label.text == (exact if whole else expected[index]), (index, label.text, expected[index])
        if not whole:
            assert MARK.search(label.text), label.text  # a partial character is marked


def sup(n: int) -> str:
    return "".join(SUPER[int(d)] for d in str(n))


def sub(n: int) -> str:
    return "".join(SUB[int(d)] for d in str(n))


# ---- without the model: hand-cut byte sequences ----


def test_a_character_cut_in_two_is_marked_in_both_tokens():
    text = "中a"
    pieces = [b"\xe4\xb8", b"\xad", b"a"]
    labels = label_tokens(pieces)
    assert [label.text for label in labels] == ["中¹⁄₂", "中²⁄₂", "a"]
    assert [label.whole for label in labels] == [False, False, True]
    assert labels[0].hex == "e4 b8"
    check_labels(text, pieces)


def test_a_token_with_a_tail_whole_characters_and_a_head():
    pieces = [b"\xe4", b"\xb8\xad\xe5\x9b\xbd\xe4", b"\xba\xba"]  # 中 | 国 | 人 cut at both ends of the middle token
    assert [label.text for label in label_tokens(pieces)] == ["中¹⁄₂", "中²⁄₂国人¹⁄₂", "人²⁄₂"]
    check_labels("中国人", pieces)


def test_piece_mark_reads_piece_of_count():
    assert piece_mark("🙂", 3, 12) == "🙂³⁄₁₂"


def test_stray_bytes_show_as_hex():
    assert label_tokens([b"\xe6\xb3"])[0].text == "⟨e6 b3⟩"  # a lead alone (a table's single token)


def test_a_plain_token_is_its_exact_text():
    labels = label_tokens([b" the", b"\n", b"caf\xc3\xa9"])
    assert [(label.text, label.whole) for label in labels] == [(" the", True), ("\n", True), ("café", True)]


@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=12), st.data())
def test_any_cut_of_any_text_round_trips(text, data):
    """Cut the UTF-8 of random text anywhere (as a byte-level BPE may): joined it is the text, labels are right."""
    raw = text.encode("utf-8")
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(raw) - 1)), max_size=len(raw))) if len(raw) > 1 else [])
    bounds = [0, *cuts, len(raw)]
    pieces = [raw[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    check_labels(text, pieces)


# ---- the page's builders ----


def test_shown_labels_make_invisible_characters_visible_and_stay_unique():
    labels = label_tokens([b"\xe2\x80", b"\x8d", b"\xe2\x80\x8d", b"e\xcc\x81"])
    shown = axis_labels([label.text for label in labels])
    assert shown == ["0:‹ZWJ›¹⁄₂", "1:‹ZWJ›²⁄₂", "2:‹ZWJ›", "3:e◌\u0301"]
    assert len(set(axis_labels(["a", "a", "a"]))) == 3  # plotly merges repeated tick labels
    assert shown_token(" 中\n") == "␣中↵"


def test_chips_carry_the_bytes_on_hover():
    labels = label_tokens([b"\xe4\xb8", b"\xad"])
    chips = token_chips_html([label.text for label in labels], token_hovers(labels))
    assert 'title="bytes e4 b8 · holds part of a character' in chips
    assert 'title="bytes ad · ' in chips
    assert "中¹⁄₂" in chips and "�" not in chips


# ---- the real tokenizers ----


@pytest.mark.parametrize("name", list(PROMPTS))
def test_smollm2_tokens_round_trip(smollm2, name):
    text = PROMPTS[name]
    ids = smollm2.encode(text)
    pieces = list(smollm2.token_pieces(ids))
    check_labels(text, pieces)
    assert "�" not in "".join(label.text for label in smollm2.token_labels(ids))


def test_smollm2_run_shows_the_labels(smollm2):
    run = smollm2.forward("注意力🙂", traces=())
    assert run.tokens == tuple(label.text for label in label_tokens(list(smollm2.token_pieces(run.token_ids))))
    assert "注¹⁄₂" in run.tokens and not any("�" in t for t in run.tokens)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(exclude_categories=("Cs",), codec="utf-8"), min_size=1, max_size=24))
def test_smollm2_random_unicode_round_trips(smollm2, text):
    """Any text the vocabulary can spell (a few bytes have no token: see ``missing_characters``)."""
    assume(not smollm2.missing_characters(text))
    ids = smollm2.encode(text)
    check_labels(text, list(smollm2.token_pieces(ids)))


@pytest.fixture(scope="module")
def minilm():
    from mha_core import pretrained

    try:
        return pretrained.load_minilm(allow_download=False)
    except RuntimeError as error:  # ModelUnavailableError: the files are not on this machine
        pytest.skip(f"the MiniLM files are not installed: {error}")


def test_minilm_wordpiece_chips(minilm):
    text = "unbelievably 注意 🙂 café"
    tokens, sources = minilm.tokenize(text), minilm.piece_sources(text)
    assert "[UNK]" in tokens and any(t.startswith("##") for t in tokens)
    assert sources[tokens.index("[UNK]")] in {"注", "意", "🙂"}
    chips = piece_chips_html(tokens, sources)
    for token in tokens:
        assert f">{token}</span>" in chips  # the piece exactly as the tokenizer writes it ('##ly', '[UNK]')
    assert 'title="from the text: 🙂"' in chips
    assert "background: rgba(253, 231, 37" in chips  # a '##' piece is drawn as a continuation


def test_smollm2_says_which_characters_it_cannot_spell(smollm2):
    text = "a\U00040000b\x04"  # lead byte f1 and the control byte 04 have no token in the file's vocabulary
    assert smollm2.missing_characters(text) == ["\U00040000", "\x04"]
    assert smollm2.missing_characters("注意力🙂é") == []
