"""A byte-level BPE tokenizer rebuilt from a GGUF file's vocabulary and merges (GPT-2's scheme).

Byte-level BPE (Radford et al. 2019) first writes the text's UTF-8 bytes as 256 printable
characters (``byte_alphabet``: a space is "Ġ", a newline "Ċ"), cuts it into pieces, then inside
each piece merges adjacent symbols in the order of the merge list until no listed pair is left.
The file lists the vocabulary (49,152 strings in that alphabet, the index is the token id) and the
merges ("Ġ t" = merge "Ġ" and "t"), in priority order.

How SmolLM2 cuts the text into pieces (llama.cpp's pre-tokenizer "smollm", as its original
tokenizer.json): every digit alone, then GPT-2's pattern (letters with an optional leading space,
numbers, punctuation runs, spaces). Tokens the file marks as control (type 3, e.g.
``<|im_start|>``) are matched whole in the text. No token is added at the start (the file sets
``add_bos_token`` false).

The merging itself runs in the ``tokenizers`` package (Rust), which the MiniLM loader uses too;
this module only assembles it from the file's lists.

Labels of tokens (``label_tokens``): a byte-level token may hold part of a character (a Chinese
character is 3 bytes, an emoji 4, and the merges may cut them). Each token is labelled with the
text it holds; a character it holds only part of is written whole with a piece mark, "中¹⁄₂" = the
first of the two tokens that share 中. ``join_token_bytes`` joins the tokens' bytes back into the
text (strict UTF-8: the labels never stand in for the bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

CONTROL = 3  # llama.cpp's token type of a control token (<|endoftext|>, <|im_start|>, ...)


@cache
def byte_alphabet() -> dict[int, str]:
    """GPT-2's map from each byte to a printable character: printable Latin-1 bytes stand for
    themselves, the 68 others (controls, space, ...) take the characters from U+0100 on."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    spelling = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in spelling:
            spelling[byte] = chr(256 + extra)
            extra += 1
    return spelling


@cache
def _unspelling() -> dict[str, int]:
    return {char: byte for byte, char in byte_alphabet().items()}


def token_bytes(token: str) -> bytes:
    """The bytes a vocabulary string stands for ("Ġthe" -> b" the"); a control token is its own text."""
    unspell = _unspelling()
    if all(char in unspell for char in token):
        return bytes(unspell[char] for char in token)
    return token.encode("utf-8")


def build_tokenizer(vocabulary: Sequence[str], merges: Sequence[str], token_types: Sequence[int]) -> Tokenizer:
    """The tokenizer of a GGUF file: its tokens (id = index), merges ("a b" strings) and token types."""
    vocab = {token: index for index, token in enumerate(vocabulary)}
    pairs = [tuple(merge.split(" ")) for merge in merges]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    control = [token for token, kind in zip(vocabulary, token_types, strict=True) if kind == CONTROL]
    tokenizer.add_special_tokens([AddedToken(token, normalized=False, special=True) for token in control])
    return tokenizer


# ---- labels of tokens ----

_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
_SUBSCRIPT = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
PIECE_SLASH = "⁄"  # U+2044 FRACTION SLASH, between a piece's number and the count of pieces


def piece_mark(char: str, piece: int, pieces: int) -> str:
    """A character held in part: the whole character with "piece of pieces" ("中", 1, 2 -> "中¹⁄₂")."""
    return f"{char}{str(piece).translate(_SUPERSCRIPT)}{PIECE_SLASH}{str(pieces).translate(_SUBSCRIPT)}"


def stray_bytes_mark(data: bytes) -> str:
    """Bytes that belong to no whole character of the text (only from a cut sequence): "⟨e6 b3⟩"."""
    return f"⟨{data.hex(' ')}⟩"


def join_token_bytes(pieces: Sequence[bytes]) -> str:
    """The text the tokens' bytes spell, joined in order; UnicodeDecodeError if they are not whole UTF-8."""
    return b"".join(pieces).decode("utf-8")


@dataclass(frozen=True)
class CharSpan:
    """One character of a byte string: its text ('' for a stray byte) and bytes [start, stop)."""

    char: str
    start: int
    stop: int


def char_spans(data: bytes) -> list[CharSpan]:
    """Cut ``data`` into UTF-8 characters (code points); a byte that starts no valid character is a stray one."""
    spans: list[CharSpan] = []
    start = 0
    while start < len(data):
        for size in (1, 2, 3, 4):
            try:
                char = data[start:start + size].decode("utf-8")
            except UnicodeDecodeError:
                continue
            spans.append(CharSpan(char, start, start + size))
            start += size
            break
        else:
            spans.append(CharSpan("", start, start + 1))
            start += 1
    return spans


@dataclass(frozen=True)
class TokenLabel:
    """How one token is shown: ``text`` its label, ``data`` its bytes, ``whole`` True when the label is its exact text."""

    text: str
    data: bytes
    whole: bool

    @property
    def hex(self) -> str:
        """The token's bytes in hex, as the hover shows them ("e4 b8")."""
        return self.data.hex(" ")


def label_tokens(pieces: Sequence[bytes]) -> tuple[TokenLabel, ...]:
    """Label each token of a sequence with the text it holds, characters it holds in part marked.

    A character whose bytes lie in one token is written as itself; one spread over n tokens is written
    in each of them as ``piece_mark(char, k, n)`` (k-th of those n tokens). A byte of no valid character
    (a sequence cut mid-character) shows as ``stray_bytes_mark``.
    """
    stops = [0]
    for piece in pieces:
        stops.append(stops[-1] + len(piece))
    data = b"".join(pieces)
    shares: list[list[str | bytes]] = [[] for _piece in pieces]  # per token: characters (str) and stray bytes
    token = 0
    for span in char_spans(data):
        while stops[token + 1] <= span.start:
            token += 1
        holders = [t for t in range(token, len(pieces)) if stops[t] < span.stop and stops[t + 1] > span.start]
        for number, holder in enumerate(holders, start=1):
            if not span.char:
                shares[holder].append(data[span.start:span.stop])
            elif len(holders) == 1:
                shares[holder].append(span.char)
            else:
                shares[holder].append(piece_mark(span.char, number, len(holders)))
    labels = []
    for piece, share in zip(pieces, shares, strict=True):
        text = "".join(_joined_strays(share))
        labels.append(TokenLabel(text, piece, _is_text(piece) and text == piece.decode("utf-8")))
    return tuple(labels)


def _joined_strays(share: list[str | bytes]) -> list[str]:
    """A token's share with each run of stray bytes written as one mark ("⟨e6 b3⟩", not "⟨e6⟩⟨b3⟩")."""
    out: list[str] = []
    run = b""
    for item in [*share, ""]:
        if isinstance(item, bytes):
            run += item
            continue
        if run:
            out.append(stray_bytes_mark(run))
            run = b""
        out.append(item)
    return out


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
