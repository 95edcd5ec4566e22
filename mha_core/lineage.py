"""What a decoder keeps per token, from MHA to compressed and linear layers, for real published configurations.

Each model is a ``ModelCache`` record: its layers grouped by what they keep (``CachePart``), with the numbers
their config.json files give (layers, key/value heads, head sizes, windows, latent ranks, state sizes) and where
those numbers were read. ``cache_bytes`` turns a record into bytes for any context length:

    a full-attention layer keeps 2 · kv · head_dim numbers per token (its keys and values), every token;
    a sliding-window layer the same, for the last ``window`` tokens only;
    an MLA layer kv_lora_rank + qk_rope_head_dim numbers per token (the latent and the shared RoPE key);
    DSA adds its lightning indexer's key, index_head_dim numbers per token;
    a Gated DeltaNet layer a state of value_heads · key_dim · value_dim numbers, whatever the length.

Every number is counted at ``BYTES_PER_NUMBER`` (bf16, 2 bytes), the dtype these checkpoints ship in; a server
may keep its cache in FP8 (DeepSeek's indexer keys) or its states in float32, which changes the bytes, not the
counts. ``measured_cache`` reads the toy layer's own cache from the engine's decoder, in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

from mha_core.marks import N_

BYTES_PER_NUMBER = 2  # bf16
LENGTHS = (4096, 131072, 1048576)  # 4k, 128k, 1M tokens


def kv_numbers(kv_heads: int, head_dim: int) -> int:
    """Numbers a softmax layer caches per token: its keys and values, 2 · kv · head_dim."""
    return 2 * kv_heads * head_dim


def kv_cache_bytes(layers: int, kv_heads: int, head_dim: int, tokens: int, bytes_per_number: int = BYTES_PER_NUMBER) -> int:
    """layers × kv_heads × head_dim × 2 (K and V) × bytes per number × tokens: a full KV cache."""
    return layers * kv_numbers(kv_heads, head_dim) * bytes_per_number * tokens


@dataclass(frozen=True)
class CachePart:
    """Layers of one kind and what each keeps: ``per_token`` numbers per token (for at most ``window`` tokens;
    None: all of them) and ``state`` numbers whatever the length."""

    kind: str  # marked words: "full attention", "sliding window", ...
    layers: int
    per_token: int = 0
    window: int | None = None
    state: int = 0

    def numbers(self, tokens: int) -> int:
        """Numbers these layers hold after ``tokens`` tokens."""
        kept = tokens if self.window is None else min(tokens, self.window)
        return self.layers * (self.per_token * kept + self.state)


@dataclass(frozen=True)
class ModelCache:
    """One published model: its name, its attention's family, its cache parts, and where the numbers come from
    (``source``: the config read; ``unchecked``: the facts that could not be checked against it, "" when all were)."""

    name: str
    family: str  # marked words
    parts: tuple[CachePart, ...]
    source: str
    unchecked: str = ""

    @property
    def layers(self) -> int:
        return sum(part.layers for part in self.parts if part.kind != INDEXER)


def cache_bytes(model: ModelCache, tokens: int, bytes_per_number: int = BYTES_PER_NUMBER) -> int:
    """Bytes the whole model's decoder keeps after ``tokens`` tokens (every part, every layer)."""
    return sum(part.numbers(tokens) for part in model.parts) * bytes_per_number


def part_bytes_per_token(part: CachePart, bytes_per_number: int = BYTES_PER_NUMBER) -> int:
    """Bytes one token adds to these layers while it is inside their window (0 for a state)."""
    return part.layers * part.per_token * bytes_per_number


FULL = N_("full attention (K, V)")
SLIDING = N_("sliding window (K, V)")
LATENT = N_("MLA latent + RoPE key")
INDEXER = N_("DSA indexer keys (same layers)")
DELTANET = N_("Gated DeltaNet state")

LINEAGE: tuple[ModelCache, ...] = (
    ModelCache("Llama 2 7B", "MHA", (CachePart(FULL, 32, kv_numbers(32, 128)),),
               "meta-llama/Llama-2-7b-hf config.json"),
    ModelCache("Llama 3 8B", "GQA", (CachePart(FULL, 32, kv_numbers(8, 128)),),
               "meta-llama/Meta-Llama-3-8B config.json"),
    ModelCache("Falcon 7B", "MQA", (CachePart(FULL, 32, kv_numbers(1, 64)),),
               "tiiuae/falcon-7b config.json (multi_query, 71 heads × 64)"),
    ModelCache("DeepSeek-V3", "MLA", (CachePart(LATENT, 61, 512 + 64),),
               "deepseek-ai/DeepSeek-V3 config.json"),
    ModelCache("DeepSeek-V3.2", "MLA + DSA", (CachePart(LATENT, 61, 512 + 64), CachePart(INDEXER, 61, 128)),
               "DeepSeek-V3.2: NeMo DeepseekV32Config (index_head_dim 128)"),
    ModelCache("Qwen3-Next-80B-A3B", N_("3:1 Gated DeltaNet : gated attention"),
               (CachePart(DELTANET, 36, state=32 * 128 * 128), CachePart(FULL, 12, kv_numbers(2, 256))),
               "Qwen/Qwen3-Next-80B-A3B config.json, vLLM Qwen3NextConfig",
               N_("the DeltaNet sizes (32 value heads, key and value dims 128) and the short convolution's state "
                  "(left out) were not checked")),
    ModelCache("Gemma 3 4B", N_("5:1 sliding window : global"),
               (CachePart(SLIDING, 29, kv_numbers(4, 256), window=1024), CachePart(FULL, 5, kv_numbers(4, 256))),
               "google/gemma-3-4b-it config.json (text_config)",
               N_("which 5 of the 34 layers are global follows the 5:1 pattern (counted here, not read)")),
    ModelCache("gpt-oss-120b", N_("1:1 banded : dense"),
               (CachePart(SLIDING, 18, kv_numbers(8, 64), window=128), CachePart(FULL, 18, kv_numbers(8, 64))),
               "openai/gpt-oss-120b config.json",
               N_("the window of 128 was read from gpt-oss-20b's config; the learned sinks (one number per head, "
                  "not per token) are left out")),
)


@dataclass(frozen=True)
class MeasuredCache:
    """The toy layer's decoder after its last token, read from the engine: ``tokens`` T, ``numbers`` held then,
    ``bytes_per_number`` of its arrays, and ``growth``: the numbers the last token added (0 for a constant state)."""

    tokens: int
    numbers: int
    bytes_per_number: int
    growth: int

    @property
    def nbytes(self) -> int:
        return self.numbers * self.bytes_per_number

    def extrapolated(self, tokens: int) -> int:
        """Bytes after ``tokens`` tokens if every later token adds what the last one did."""
        return (self.numbers + (tokens - self.tokens) * self.growth) * self.bytes_per_number


def measured_cache(numbers_after: list[int], bytes_per_number: int) -> MeasuredCache:
    """From the numbers the decoder keeps after each token (``VariantStep.numbers``), the last one's size and growth."""
    before = numbers_after[-2] if len(numbers_after) > 1 else 0
    return MeasuredCache(len(numbers_after), numbers_after[-1], bytes_per_number, numbers_after[-1] - before)
