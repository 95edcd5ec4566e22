"""Lesson 18, tokens across scripts: the same sentence costs SmolLM2 more tokens in Chinese than in English,
and MiniLM's WordPiece cuts Chinese into single characters, some of them [UNK].

The counts come from the real tokenizers: SmolLM2's byte-level BPE rebuilt from its GGUF file
(``mha_core.bpe.build_tokenizer``) and MiniLM's WordPiece (its ``tokenizer.json``), read from the files the Real
model page uses, never downloaded here. A tokenizer whose file is missing is left out with a warning; the bytes and
characters, which need no model, are always shown.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import pandas as pd
from tokenizers import Tokenizer

from mha_core._minilm_files import find_model_source, verify_file
from mha_core._smollm2_files import find_gguf, verify_gguf
from mha_core.bpe import build_tokenizer, token_bytes
from mha_core.gguf_reader import read_gguf
from mha_core.pretrained import TOKENIZER_FILE
from ui.i18n import N_, _, sentences
from ui.pages.lessons.records import BASE, Claim, Findings, Lesson, LessonPanel

ENGLISH, CHINESE, SPANISH = N_("English"), N_("Chinese"), N_("Spanish")
# The same meaning in three languages (model inputs: never translated).
SENTENCES: tuple[dict[str, str], ...] = (
    {ENGLISH: "The cat sat on the mat.", CHINESE: "猫坐在垫子上。", SPANISH: "El gato se sentó en la alfombra."},
    {ENGLISH: "I love learning languages.", CHINESE: "我喜欢学习语言。", SPANISH: "Me encanta aprender idiomas."},
    {ENGLISH: "Attention lets every word look at every other word.", CHINESE: "注意力让每个词都能看到其他每个词。",
     SPANISH: "La atención permite que cada palabra mire a todas las demás."},
)
SPECIAL = ("[CLS]", "[SEP]")  # MiniLM adds these to every sentence; not counted as the sentence's pieces
UNKNOWN = "[UNK]"


@functools.cache
def smollm2_tokenizer() -> Tokenizer:
    """SmolLM2's tokenizer from its verified GGUF file (settings only, no weights); RuntimeError when absent.
    Cached once per process (a failure is not cached: installing the model later is seen on the next run)."""
    found = find_gguf(allow_download=False)
    verify_gguf(found.path)
    meta = read_gguf(found.path).metadata
    return build_tokenizer(tuple(meta["tokenizer.ggml.tokens"]), meta["tokenizer.ggml.merges"],
                           meta["tokenizer.ggml.token_type"])


@functools.cache
def minilm_tokenizer() -> Tokenizer:
    """MiniLM's WordPiece from its verified tokenizer.json, padding and truncation off; RuntimeError when absent."""
    path = find_model_source(allow_download=False).path(TOKENIZER_FILE.name)
    verify_file(path, TOKENIZER_FILE)
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def char_spans(text: str) -> list[tuple[int, int, str]]:
    """(first byte, end byte, character) of each character of ``text`` in its UTF-8 encoding."""
    spans, at = [], 0
    for char in text:
        spans.append((at, at + len(char.encode("utf-8")), char))
        at = spans[-1][1]
    return spans


def byte_pieces(text: str, pieces: list[bytes]) -> list[str]:
    """Each byte-level piece as the text it holds: whole characters as they are, a character cut between pieces as
    itself followed by the bytes this piece holds of it, in hex between ‹ › ('猫' cut in two: '猫‹e7 8c›',
    '猫‹ab›'). A space is '␣'."""
    encoded, shown, start = text.encode("utf-8"), [], 0
    for piece in pieces:
        stop, parts = start + len(piece), []
        for first, last, char in char_spans(text):
            if last <= start or first >= stop:
                continue
            if start <= first and last <= stop:
                parts.append("␣" if char == " " else char)
            else:
                parts.append(char + "‹" + " ".join(f"{b:02x}" for b in encoded[max(first, start) : min(last, stop)]) + "›")
        shown.append("".join(parts))
        start = stop
    return shown


def cut_characters(text: str, pieces: list[bytes]) -> int:
    """How many characters of ``text`` no piece holds whole (a piece boundary falls inside their bytes)."""
    ends, at = set(), 0
    for piece in pieces:
        at += len(piece)
        ends.add(at)
    return sum(any(first < end < last for end in ends) for first, last, _char in char_spans(text))


@dataclass(frozen=True)
class Counted:
    """One sentence, counted: its characters, bytes, and the pieces of each tokenizer (None: tokenizer absent)."""

    language: str  # ENGLISH, CHINESE or SPANISH (the msgid)
    text: str
    smollm2: list[str] | None  # pieces as shown (byte_pieces)
    cut: int | None  # characters no SmolLM2 piece holds whole
    minilm: list[str] | None  # word pieces, [CLS] and [SEP] left out

    @property
    def chars(self) -> int:
        return len(self.text)

    @property
    def n_bytes(self) -> int:
        return len(self.text.encode("utf-8"))

    @property
    def unknown(self) -> int | None:
        return None if self.minilm is None else self.minilm.count(UNKNOWN)


def count(language: str, text: str, smollm2: Tokenizer | None, minilm: Tokenizer | None) -> Counted:
    """``text`` counted by each tokenizer that is available."""
    pieces = cut = words = None
    if smollm2 is not None:
        raw = [token_bytes(token) for token in smollm2.encode(text).tokens]
        pieces, cut = byte_pieces(text, raw), cut_characters(text, raw)
    if minilm is not None:
        words = [t for t in minilm.encode(text).tokens if t not in SPECIAL]
    return Counted(language, text, pieces, cut, words)


def available(load) -> tuple[Tokenizer | None, str]:
    """The tokenizer ``load`` returns, or None and the first line of why not (the model's file is missing)."""
    try:
        return load(), ""
    except RuntimeError as error:  # ModelUnavailableError, ModelIntegrityError: the model's file is absent or damaged
        return None, str(error).splitlines()[0]


def counts_table(rows: list[Counted]) -> pd.DataFrame:
    """One row per sentence: characters, UTF-8 bytes, SmolLM2 tokens, MiniLM pieces and [UNK] (absent: left out)."""
    table = {_("language"): [_(r.language) for r in rows], _("sentence"): [r.text for r in rows],
             _("characters"): [r.chars for r in rows], _("UTF-8 bytes"): [r.n_bytes for r in rows]}
    if rows[0].smollm2 is not None:
        table[_("SmolLM2 tokens")] = [len(r.smollm2) for r in rows]
        table[_("characters cut into byte pieces")] = [r.cut for r in rows]
    if rows[0].minilm is not None:
        table[_("MiniLM pieces")] = [len(r.minilm) for r in rows]
        table[_("[UNK] pieces")] = [r.unknown for r in rows]
    return pd.DataFrame(table)


def pieces_table(rows: list[Counted]) -> pd.DataFrame:
    """One row per sentence: its pieces in each tokenizer, separated by ' | '."""
    table = {_("language"): [_(r.language) for r in rows]}
    if rows[0].smollm2 is not None:
        table[_("SmolLM2 pieces")] = [" | ".join(r.smollm2) for r in rows]
    if rows[0].minilm is not None:
        table[_("MiniLM word pieces")] = [" | ".join(r.minilm) for r in rows]
    return pd.DataFrame(table)


def tokens_findings(panels: tuple[LessonPanel, ...]) -> Findings:
    """Bytes per character; SmolLM2's tokens per sentence by language; MiniLM's pieces and [UNK] in Chinese."""
    smollm2, why_smollm2 = available(smollm2_tokenizer)
    minilm, why_minilm = available(minilm_tokenizer)
    rows = [count(language, text, smollm2, minilm) for row in SENTENCES for language, text in row.items()]
    english, chinese, spanish = rows[0], rows[1], rows[2]
    claims = [
        Claim(_("“{zh}” has {chars} characters but {n_bytes} UTF-8 bytes, {per:.0f} per character; the English “{en}” "
                "has as many bytes as characters ({en_bytes}).").format(
            zh=chinese.text, chars=chinese.chars, n_bytes=chinese.n_bytes, per=chinese.n_bytes / chinese.chars,
            en=english.text, en_bytes=english.n_bytes),
            chinese.n_bytes == 3 * chinese.chars and english.n_bytes == english.chars),
    ]
    if smollm2 is not None:
        en_tokens, zh_tokens = (sum(len(r.smollm2) for r in rows[first::3]) for first in (0, 1))
        claims += [
            Claim(_("SmolLM2 cuts “{en}” into {en_tokens} tokens and the same sentence in Chinese into {zh_tokens}, "
                    "although the Chinese has {zh_chars} characters against {en_chars}.").format(
                en=english.text, en_tokens=len(english.smollm2), zh_tokens=len(chinese.smollm2),
                zh_chars=chinese.chars, en_chars=english.chars),
                len(chinese.smollm2) > len(english.smollm2) and chinese.chars < english.chars),
            Claim(_("Over the {n} sentences, the Chinese costs {zh} SmolLM2 tokens and the English {en}: {ratio:.1f}× "
                    "as many for the same meaning.").format(n=len(SENTENCES), zh=zh_tokens, en=en_tokens,
                                                             ratio=zh_tokens / en_tokens),
                zh_tokens > en_tokens),
            Claim(_("{cut} of the {chars} characters of “{zh}” are cut between tokens: no SmolLM2 token holds them "
                    "whole, only some of their bytes.").format(cut=chinese.cut, chars=chinese.chars, zh=chinese.text),
                chinese.cut > 0),
        ]
    if minilm is not None:
        claims.append(
            Claim(_("MiniLM's WordPiece gives each Chinese character of “{zh}” its own piece ({pieces} pieces for "
                    "{chars} characters); {unk} of them are [UNK], characters its vocabulary does not have, so the "
                    "model cannot tell them apart.").format(zh=chinese.text, pieces=len(chinese.minilm),
                                                            chars=chinese.chars, unk=chinese.unknown),
                len(chinese.minilm) == chinese.chars and chinese.unknown > 0))
        claims.append(
            Claim(_("MiniLM lowercases and drops accents before it cuts: “{es}” has {es_unk} [UNK] among its "
                    "{es_pieces} pieces.").format(es=spanish.text, es_unk=spanish.unknown,
                                                   es_pieces=len(spanish.minilm)),
                spanish.unknown == 0 and all(piece.isascii() for piece in spanish.minilm)))
    missing = [_("SmolLM2's model file was not found on this server ({why}): its token counts are left out.").format(
        why=why_smollm2)] if smollm2 is None else []
    if minilm is None:
        missing.append(_("MiniLM's model files were not found on this server ({why}): its word pieces are left "
                         "out.").format(why=why_minilm))
    tables = (
        (_("Each sentence counted by the real tokenizers ([CLS] and [SEP] not counted)."), counts_table(rows)),
        (_("The pieces, separated by |: ␣ is a space; 猫‹e7 8c› is a piece holding only part of 猫, its UTF-8 bytes "
           "e7 8c (hex)."), pieces_table(rows)),
    )
    return Findings((), tuple(claims), tables, warning=sentences(*missing))


LESSONS = (
    Lesson(
        key="tokens",
        title=N_("Why the same sentence costs more tokens in Chinese"),
        short_title=N_("Tokens across scripts"),
        question=N_("Why does my Chinese prompt use up so many more tokens than the English one?"),
        source=N_("raised in Transformer Explainer #86"),
        source_url="https://github.com/poloclub/transformer-explainer/pull/86",
        panels=(LessonPanel(N_("The Chinese sentence, one character per token"),
                            replace(BASE, tokens=tuple(SENTENCES[0][CHINESE].rstrip("。")))),),
        explanation=N_(
            "SmolLM2's byte-level BPE first writes the text as UTF-8 bytes: an English letter is one byte, a Chinese "
            "character three. Its merges were learned mostly on English, so common English words became single "
            "tokens while many Chinese characters stay cut into two or three byte pieces. MiniLM's WordPiece "
            "instead gives each Chinese character its own piece, and a character missing from its vocabulary becomes "
            "[UNK]: its meaning is lost before attention starts."
        ),
        findings=tokens_findings,
    ),
)
