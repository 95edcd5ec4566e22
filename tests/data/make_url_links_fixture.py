"""Freeze what the URL reader and writer do, as ``url_links_before_settings_table.json``.

Run once from the repository root at commit 2bf5f30, before ``ui/state/settings.py``:
``python tests/data/make_url_links_fixture.py``. ``tests/test_url_links.py`` checks today's code against it.
"""

import json
import sys
from pathlib import Path
from urllib.parse import parse_qsl

sys.path.insert(0, ".")
from ui.state.urlstate import config_from_params, params_from_config, view_from_params, view_params

LINKS = [
    "", "tokens=the+cat+sat+on+the+mat&d_model=16&heads=4&mask=causal&view=logits",
    "tokens=a+b+c", "tokens=%20%20", "tokens=" + "+".join(["w"] * 70), "tokens=", "kv_tokens=", "kv_tokens=a+dog+ran",
    "kv_tokens=%20", "kv_tokens=" + "+".join(["k"] * 80), "tokens=a+b&kv_tokens=x+y+z+w",
    "d_model=8", "d_model=512", "d_model=1", "d_model=0", "d_model=-16", "d_model=100000", "d_model=abc", "d_model=", "d_model=3.5",
    "heads=1", "heads=2", "heads=16", "heads=99", "heads=0", "heads=x", "d_model=12&heads=5", "d_model=7&heads=3", "d_model=12&heads=16",
    "seed=0", "seed=42", "seed=4294967295", "seed=4294967296", "seed=-3", "seed=abc", "seed=1e3",
    *[f"init={i}" for i in ["xavier", "uniform", "normal", "he", "identity", "previous", "first", "same", "uniform_head", "magic", "XAVIER", ""]],
    "init=identity&d_model=4&heads=4", "init=previous&d_model=2&heads=1", "init=same&d_model=8&heads=2",
    "bias=0", "bias=1", "bias=yes", "bias=2", "bias=",
    "pe=0", "pe=1", "pe=true", "pe=2",
    *[f"scale={s}" for s in ["sqrt_dk", "sqrt_t", "none", "temperature", "cuberoot"]],
    "scale=temperature&temperature=2.5", "scale=temperature&temperature=0.5", "scale=temperature&temperature=1000",
    "scale=temperature&temperature=1001", "scale=temperature&temperature=hot", "scale=temperature&temperature=-2",
    "scale=temperature&temperature=nan", "scale=temperature&temperature=inf", "scale=temperature&temperature=0",
    "scale=temperature&temperature=1e-3", "temperature=3", "temperature=hot", "scale=sqrt_t&temperature=3",
    *[f"mask={m}" for m in ["none", "causal", "padding", "window", "custom", "diagonal"]],
    "mask=padding&valid_len=3", "mask=padding&valid_len=0", "mask=padding&valid_len=6", "mask=padding&valid_len=9",
    "mask=padding&valid_len=-1", "mask=padding&valid_len=x", "valid_len=3", "mask=padding&kv_tokens=a+b&valid_len=2",
    "mask=padding&kv_tokens=a+b&valid_len=5",
    "mask=window&window=2", "mask=window&window=0", "mask=window&window=64", "mask=window&window=65", "mask=window&window=w",
    "window=3", "window=99",
    "tokens=a+b+c&mask=custom&cmask=100.110.111", "tokens=a+b+c&mask=custom&cmask=10.11", "tokens=a+b+c&mask=custom&cmask=1x0.110.111",
    "tokens=a+b+c&mask=custom&cmask=", "tokens=a+b+c&mask=custom", "tokens=a+b+c&mask=custom&cmask=10.110.111.1111",
    "tokens=a+b&kv_tokens=x+y+z&mask=custom&cmask=101.010", "cmask=101", "tokens=a+b&mask=causal&cmask=10.11",
    "emb=random", "emb=onehot", "emb=custom", "emb=xyz", "emb=onehot&d_model=4", "emb=onehot&d_model=4&heads=4&init=identity",
    "emb=onehot&tokens=a+b+c+d+e&d_model=4&heads=2",
    "wo=0", "wo=1", "wo=no",
    *[f"view={v}" for v in ["weights", "logits", "scores", "heat", ""]],
    "avg=1", "avg=0", "avg=x", "head=3", "head=7", "head=-1", "head=x", "heads=2&head=1", "heads=2&head=7",
    "qi=2", "qi=5", "qi=6", "qi=x", "kj=5", "kj=9", "kv_tokens=a+b+c+d+e+f+g+h&kj=7", "kv_tokens=a+b&kj=5&qi=5",
    "present=1", "present=0", "present=2", "head=7&qi=x&view=heat&present=2",
    "lesson=intro", "unknown=1",
    "tokens=the+cat&kv_tokens=a+dog+ran&d_model=24&heads=6&seed=7&init=he&bias=1&pe=1&scale=temperature&temperature=0.75"
    "&mask=padding&valid_len=2&emb=onehot&wo=0&view=scores&avg=1&head=5&qi=1&kj=2&present=1",
    "tokens=a+b+c+d&d_model=32&heads=8&init=first&scale=none&mask=window&window=1&view=logits",
    "d_model=abc&heads=x&seed=y&init=z&bias=q&pe=r&scale=s&mask=t&emb=u&wo=v&view=w&avg=a&head=b&qi=c&kj=d&present=e",
]


def record(query: str) -> dict:
    params = dict(parse_qsl(query, keep_blank_values=True))
    config, messages = config_from_params(params)
    view, view_messages = view_from_params(params, config)
    return {
        "params": params,
        "config": {k: (list(map(list, v)) if k == "custom_mask" and v else list(v) if isinstance(v, tuple) else v)
                   for k, v in config.__dict__.items()},
        "messages": messages,
        "view": view,
        "view_messages": view_messages,
        "written": {**params_from_config(config), **view_params(view)},
    }


if __name__ == "__main__":
    rows = [f" {json.dumps(q, ensure_ascii=False)}: {json.dumps(record(q), ensure_ascii=False)}" for q in LINKS]
    frozen = "{\n" + ",\n".join(rows) + "\n}"  # one link a line
    Path("tests/data/url_links_before_settings_table.json").write_text(frozen + "\n")
    print(len(LINKS), "links")
