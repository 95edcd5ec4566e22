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
"""

from __future__ import annotations

from collections.abc import Sequence
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
