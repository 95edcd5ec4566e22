"""Every setting a user can change, once: config field, widget, URL name, default, limits, label, help.

The sidebar (``ui/widgets/``), the URL reader and writer (``ui/state/urlstate.py``) and the
``MHAConfig`` they build all walk these tables, so adding a setting is one row here plus its use in
the engine. Pure data and small rules: no streamlit.

A row's functions (``applies``, ``limits``, ``default``, ``disabled``) take the *values so far*: a
mapping from setting name to value, filled in table order (so a row may depend on rows above it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType

from mha_core.config import EMBEDDINGS, LIMITS, MAX_ROPE_BASE, MHAConfig, valid_head_counts, valid_kv_head_counts
from mha_core.kernels import KERNELS
from mha_core.masks import causal_mask
from mha_core.mla import default_mla_rope
from mha_core.positions import SCHEMES
from mha_core.presets import PRESET_INITS, PRESETS
from mha_core.sparse import MAX_SPARSE
from ui.charts.record_labels import RecordLabels
from ui.charts.views import SHORT_VIEW_LABELS
from ui.i18n import N_, _, sentences
from ui.i18n.languages import DEFAULT_LANGUAGE, LANGUAGE_LABELS

Values = Mapping[str, object]  # setting name -> value, for the rows read so far

ASKED = "{}_asked"  # in the values read from a link: what it asked for, where a rule changed it (``fit``)
FROM_CONFIG = object()  # a row's default: the config field's default in MHAConfig
CONFIG_CLASS = MHAConfig  # what the settings build (a test swaps in a subclass with one more field)


def _always(values: Values) -> bool:
    return True


def _never(values: Values) -> bool:
    return False


@dataclass(frozen=True)
class Setting:
    """One setting: how it is stored (config field), drawn (widget), linked (URL) and bounded."""

    name: str  # widget key "w_<name>"; also the URL parameter unless ``url`` says otherwise
    kind: str  # tokens | int | float | flag | choice | grid | heads: how the URL value is read and written
    field: str | None = None  # the MHAConfig field; None for a view setting (what is on screen)
    url: str | None = None  # URL parameter name, when it is not ``name``
    label: str = ""
    short_label: str = ""  # the label in a summary ("Heads"), when ``label`` says more
    help: str | Callable[[], str] | None = None  # a callable: words made from a table at each run
    section: str = ""  # the sidebar header the widget sits under
    widget: str = ""  # how the sidebar draws it (ui/widgets/ WIDGETS); "" = a page draws it
    default: object = FROM_CONFIG  # a value, or a function of the values so far
    limits: tuple | Callable[[Values], tuple] | None = None  # (low, high), inclusive (float: low excluded)
    choices: Mapping[str, str] = dataclasses.field(default_factory=dict)  # value -> the widget's label for it
    short_choices: Mapping[str, str] = dataclasses.field(default_factory=dict)  # value -> a summary's label, if shorter
    url_choices: tuple[str, ...] | None = None  # the values a link may carry, when not every choice
    legacy: Mapping[str, str] = dataclasses.field(default_factory=dict)  # old URL values still read -> today's value
    writes_legacy: bool = False  # write a value that has an old spelling in it, so older apps read the link too
    applies: Callable[[Values], bool] = _always  # drawn, written to the URL and put in the config only then
    kept_unused: bool = False  # a link's value reaches the config even where the row does not apply
    written: str = "always"  # always | changed: the URL carries the value only when it is not the default
    disabled: Callable[[Values], bool] = _never  # the widget is drawn but cannot be changed
    widget_limits: tuple | Callable[[Values], tuple] | None = None  # the widget's range, when not ``limits``
    fit: Callable[[object, Values], tuple[object, str | None]] | None = None  # a rule tying it to rows above
    note: Callable[[Values], str | None] | None = None  # a line under the widget, from the values (its own too)

    @property
    def key(self) -> str:
        """The widget's session-state key."""
        return f"w_{self.name}"

    @property
    def param(self) -> str:
        """The URL query parameter."""
        return self.url or self.name

    def default_for(self, values: Values):
        """The value when neither the link nor the user set one."""
        if self.default is FROM_CONFIG:
            return next(f.default for f in fields(CONFIG_CLASS) if f.name == self.field)
        return self.default(values) if callable(self.default) else self.default

    def bounds(self, values: Values) -> tuple:
        """(low, high) for this row given the values so far."""
        return self.limits(values) if callable(self.limits) else self.limits

    def widget_bounds(self, values: Values) -> tuple:
        """(low, high) the widget offers given the values so far."""
        limits = self.widget_limits if self.widget_limits is not None else self.limits
        return limits(values) if callable(limits) else limits

    def link_choices(self) -> tuple[str, ...]:
        """The values a link may carry."""
        return self.url_choices or tuple(self.choices)

    @property
    def short_name(self) -> str:
        """The setting's name in a summary line or a list of differences (in the run's language)."""
        return _(self.short_label or self.label) if (self.short_label or self.label) else self.name

    def short_choice(self, value: str) -> str:
        """A choice's label in a summary line: its short label, else the widget's (in the run's language)."""
        label = self.short_choices.get(value) or self.choices.get(value)
        return _(label) if label else value

    def choice_label(self, value: str) -> str:
        """A choice's label as its widget shows it, in the run's language (the table's labels are marked N_)."""
        label = self.choices.get(value)
        return _(label) if label else value

    @property
    def help_text(self) -> str | None:
        """The widget's help, in the run's language."""
        if callable(self.help):  # words made from a table's rows, each row's words translated
            return self.help()
        return _(self.help) if self.help else None


def key_tokens(values: Values) -> tuple[str, ...]:
    """The keys' tokens: the second sentence in cross-attention, else the sentence."""
    return values["kv_tokens"] or values["tokens"]


def fit_sentence(tokens: tuple[str, ...], example) -> tuple[tuple[str, ...] | None, str | None]:
    """The tokens a sentence may use, and why they differ from those given (None when they do not).

    An empty sentence becomes ``example``; a longer one than the limit keeps its first tokens.
    """
    limit = LIMITS["max_tokens"]
    if not tokens:
        return example, None if example is None else _("is empty: using '{example}'").format(example=" ".join(example))
    if len(tokens) > limit:
        return tokens[:limit], _("has {n} tokens; the limit is {limit}: keeping the first {limit}").format(
        n=len(tokens), limit=limit)
    return tokens, None


def fitting_heads(heads: int, d_model: int) -> int:
    """The largest head count that divides ``d_model`` and is at most ``heads`` (at least 1)."""
    return max(h for h in valid_head_counts(d_model) if h <= max(heads, 1))


def _fit_heads(heads: int, values: Values) -> tuple[int, str | None]:
    """Heads that divide d_model, and why the given count was changed (None when it was kept)."""
    d_model = values["d_model"]
    fitting = fitting_heads(heads, d_model)
    if fitting == heads:
        return heads, None
    return fitting, _("does not divide d_model {d_model} (choose {choices})").format(
        d_model=d_model, choices=", ".join(map(str, valid_head_counts(d_model))))


def fitting_kv_heads(kv_heads: int, heads: int) -> int:
    """The largest key/value head count that divides ``heads`` and is at most ``kv_heads`` (at least 1)."""
    return max(k for k in valid_kv_head_counts(heads) if k <= max(kv_heads, 1))


def kv_heads_after(heads: int, before_heads: int, before_kv: int) -> tuple[int, str | None]:
    """Key/value heads for a new head count, keeping what the old pair meant, and why when it cannot.

    Multi-head stays multi-head (kv follows heads while they were equal); a grouping keeps its group
    size (query heads per K/V head) where the new count allows it, else takes the nearest valid count.
    """
    if before_kv >= before_heads or before_heads % max(before_kv, 1):
        return (heads, None) if before_kv >= before_heads else (fitting_kv_heads(before_kv, heads), None)
    group = before_heads // before_kv
    if heads % group == 0:
        return heads // group, None
    choices = valid_kv_head_counts(heads)
    nearest = min(choices, key=lambda k: (abs(heads / k - group), k))
    return nearest, _("cannot keep groups of {group} query heads per K/V head with {heads} heads; the nearest "
                       "is groups of {nearest}").format(group=group, heads=heads, nearest=heads // nearest)


def _fit_kv_heads(kv_heads: int, values: Values) -> tuple[int, str | None]:
    """Key/value heads that divide the heads, and why the given count was changed (None when it was kept).

    When the link's head count was fitted to d_model, the link's grouping follows it (``kv_heads_after``).
    """
    heads, asked = values["heads"], values.get(ASKED.format("heads"), values["heads"])
    if asked != heads and 1 <= kv_heads <= asked:
        fitted, reason = kv_heads_after(heads, asked, kv_heads)
        kept = _("keeps groups of {group} query heads per K/V head with {heads} heads").format(
            group=asked // kv_heads, heads=heads)
        return fitted, None if fitted == kv_heads else reason or kept
    fitting = fitting_kv_heads(kv_heads, heads)
    if fitting == kv_heads:
        return kv_heads, None
    return fitting, _("does not divide {heads} heads (choose {choices})").format(
        heads=heads, choices=", ".join(map(str, valid_kv_head_counts(heads))))


def _turns(values: Values) -> bool:
    """The chosen positional scheme turns q and k (RoPE): its base applies."""
    return values["pe"] in SCHEMES and SCHEMES[values["pe"]].turns


def _tuned(field: str) -> Callable[[Values], bool]:
    """A kernel's own setting (``Kernel.tunes``) applies only with a kernel that reads it."""
    return lambda values: field in getattr(KERNELS.get(values["kernel"]), "tunes", ())


def _hand_built(values: Values) -> bool:
    return values["init"] in PRESET_INITS


INIT_LABELS = {
    "xavier": N_("Xavier / Glorot normal (default)"),
    "uniform": N_("uniform [0, 1)  (seed 000)"),
    "normal": N_("standard normal  (seed 003)"),
    "he": N_("He normal  (seed 004)"),
    **{init: preset.label for init, preset in PRESETS.items()},  # the hand-built heads (mha_core/presets.py)
}
SCALE_LABELS = {
    "sqrt_dk": N_("1/√d_k  (standard)"),
    "sqrt_t": N_("1/√T  (seed 001: number of keys)"),
    "none": N_("none (×1)"),
    "temperature": N_("1/temperature"),
}
# Shorter labels for a summary line, where the widget's label explains more.
INIT_SHORT_LABELS = {"xavier": "Xavier", "uniform": N_("uniform [0, 1)"), "normal": N_("standard normal"), "he": N_("He normal")}
SCALE_SHORT_LABELS = {"sqrt_dk": "1/√d_k", "sqrt_t": "1/√T", "none": N_("none")}
MASK_SHORT_LABELS = {"causal": N_("causal"), "padding": N_("padding"), "custom": N_("custom")}
MASK_LABELS = {
    "none": N_("none"),
    "causal": N_("causal (no peeking ahead)"),
    "padding": N_("padding (valid length)"),
    "window": N_("sliding window"),
    "custom": N_("custom (edit the grid)"),
}


def causal_cross_note(values: Values) -> str | None:
    """What ``causal`` means when the keys come from a second sentence, read from the engine's mask; None otherwise."""
    if values["mask"] != "causal" or not values["kv_tokens"]:
        return None
    tq, tk = len(values["tokens"]), len(values["kv_tokens"])
    allowed = causal_mask(tq, tk)  # (Tq, Tk), the mask the engine applies
    note = _("Cross-attention with a causal mask: the two sentences are lined up from their first tokens, and "
             "query i may attend to keys 0..i of the key/value sentence (key j only when j ≤ i).")
    sees_all = [i for i in range(tq) if allowed[i].all()]
    if sees_all:
        note = sentences(note, _("Queries {first}..{last} see all {tk} keys.").format(
            first=sees_all[0], last=tq - 1, tk=tk) if len(sees_all) > 1 else
            _("Query {first} sees all {tk} keys.").format(first=sees_all[0], tk=tk))
    unseen = [j for j in range(tk) if not allowed[:, j].any()]
    if unseen:
        note = sentences(note, _("Keys {first}..{last} come after the last query: no query sees them.").format(
            first=unseen[0], last=tk - 1) if len(unseen) > 1 else
            _("Key {first} comes after the last query: no query sees it.").format(first=unseen[0]))
    return sentences(note, _("(An encoder–decoder's cross-attention uses no mask: every query sees every key.)"))


def _mla_rope_default(values: Values) -> int:
    """A quarter of the head for MLA's decoupled RoPE part when RoPE is on, else none."""
    return default_mla_rope(values["d_model"] // values["heads"]) if _turns(values) else 0


POSITION_LABELS = RecordLabels(SCHEMES, "label")
SHORT_POSITION_LABELS = RecordLabels(SCHEMES, "short_label")
KERNEL_LABELS = RecordLabels(KERNELS, "label")
EMBEDDING_LABELS = {"random": N_("seeded random"), "onehot": N_("one-hot"), "custom": N_("uploaded matrix")}
LINK_EMBEDDINGS = tuple(e for e in EMBEDDINGS if e != "custom")  # an uploaded matrix cannot travel in a link
NUMBERS_LABELS = {  # Step by step: each cell's value printed in it (issue 38: none unless the reader asks)
    "auto": N_("Auto: up to 6 tokens"),
    "1": N_("On"),
    "0": N_("Off"),
}
NUMBERS_MAX_TOKENS = 6  # "auto" prints the numbers of sentences this short (not on a phone); longer ones crowd


def numbers_shown(choice: str, n_tokens: int, phone: bool) -> bool:
    """Whether the cells print their numbers: "1" on, "0" off, "auto" on for at most NUMBERS_MAX_TOKENS tokens
    (queries or keys, whichever are more) on a screen that is not a phone's."""
    if choice == "auto":
        return n_tokens <= NUMBERS_MAX_TOKENS and not phone
    return choice == "1"


COLOUR_RANGE_LABELS = {  # the weights view's colour range (ui/charts/colour_ranges.py)
    "fixed": N_("0..1, all heads"),
    "max": N_("0..largest shown"),
    "head": N_("each head 0..its largest"),
}

# The model's settings, in sidebar order. Rows below may depend on rows above.
SETTINGS: tuple[Setting, ...] = (
    Setting("tokens", "tokens", "tokens", label=N_("Sentence"), section=N_("Model"), widget="sentence",
            help=N_("Words separated by spaces; repeated words stay separate tokens.")),
    Setting("kv_tokens", "tokens", "kv_tokens", label=N_("Key/value sentence"), section=N_("Model"), widget="second_sentence",
            help=N_("The tokens the queries look at.")),
    Setting("d_model", "int", "d_model", label=N_("d_model (model width)"), short_label="d_model", section=N_("Model"),
            widget="number",
            limits=(1, LIMITS["max_d_model"])),
    Setting("heads", "int", "n_heads", label=N_("Heads (only those dividing d_model)"), short_label=N_("Heads"), section=N_("Model"),
            widget="heads",
            limits=(1, LIMITS["max_heads"]), fit=_fit_heads),
    Setting("seed", "int", "seed", label=N_("Seed"), section=N_("Model"), widget="number", limits=(0, LIMITS["max_seed"])),
    Setting("init", "choice", "init", label=N_("Weights"), section=N_("Model"), widget="init", choices=INIT_LABELS,
            short_choices=INIT_SHORT_LABELS),
    Setting("bias", "flag", "bias", label=N_("Biases"), section=N_("Model"), widget="toggle", disabled=_hand_built),
    Setting("wo", "flag", "output_projection", label=N_("Output projection W_O"), section=N_("Model"), widget="toggle",
            written="changed"),
    Setting("kv_heads", "int", "kv_heads", label=N_("Key/value heads (GQA; 1 = MQA)"), short_label=N_("K/V heads"), section=N_("Model"),
            widget="kv_heads", default=lambda v: v["heads"], limits=lambda v: (1, v["heads"]), fit=_fit_kv_heads,
            written="changed", help=N_("Query heads in a group share one key/value head: fewer K/V heads, a "
            "smaller KV cache. Equal to heads: ordinary multi-head attention.")),
    Setting("embedding", "choice", "embedding", url="emb", label=N_("Embeddings"), section=N_("Inputs"), widget="select",
            choices=EMBEDDING_LABELS, url_choices=LINK_EMBEDDINGS, written="changed"),
    Setting("pe", "choice", "pe", label=N_("Positions"), section=N_("Inputs"), widget="select", choices=POSITION_LABELS,
            short_choices=SHORT_POSITION_LABELS,
            default="none",
            legacy={"0": "none", "1": "sinusoidal"}, writes_legacy=True, disabled=_hand_built,
            help=lambda: sentences(*(f"{_(s.short_label)}: {_(s.summary)}" for s in SCHEMES.values()
                                     if s.acts))),  # rows
    Setting("rope_base", "float", "rope_base", label=N_("RoPE base θ"), section=N_("Inputs"), widget="number",
            limits=(1.0, MAX_ROPE_BASE), widget_limits=(1.5, MAX_ROPE_BASE), applies=_turns,
            help=N_("Pair p turns by position × θ^(−2p/d_k): a larger base turns the slow pairs slower.")),
    Setting("scale", "choice", "scale_rule", label=N_("Scale"), section=N_("Scores"), widget="select", choices=SCALE_LABELS,
            short_choices=SCALE_SHORT_LABELS),
    Setting("temperature", "float", "temperature", label=N_("Temperature"), section=N_("Scores"), widget="number",
            limits=(0.0, LIMITS["max_temperature"]), widget_limits=(0.01, LIMITS["max_temperature"]), applies=lambda v: v["scale"] == "temperature", kept_unused=True),
    Setting("null_key", "flag", "null_key", url="null", label=N_("Null key (softmax₁)"), short_label=N_("Null key"),
            section=N_("Scores"), widget="toggle",
            written="changed", help=N_("An extra key of score 0 and value 0 that every query may attend to: each row's "
            "weights then sum to at most 1, and a row may put its weight 'nowhere' (softmax with +1 in the denominator).")),
    Setting("kernel", "choice", "kernel", label=N_("Attention kernel"), section=N_("Scores"), widget="select",
            choices=KERNEL_LABELS, written="changed",
            help=N_("How each head turns its queries and keys into weights: the 2017 softmax or a later variant. "
                    "About lists every kernel with its paper, its formula and what it cannot combine with.")),
    Setting("sparse_block", "int", "sparse_block", url="block", label=N_("Block size B (MoBA)"), short_label=N_("Block"),
            section=N_("Scores"), widget="number", limits=(1, MAX_SPARSE), applies=_tuned("sparse_block"),
            written="changed", help=N_("MoBA cuts the keys into blocks of B tokens; a block's gate is q · its mean key.")),
    Setting("sparse_topk", "int", "sparse_topk", url="topk", label=N_("Top-k (MoBA: blocks; DSA: keys)"),
            short_label=N_("Top-k"), section=N_("Scores"), widget="number", limits=(1, MAX_SPARSE),
            applies=_tuned("sparse_topk"), written="changed",
            help=N_("How many blocks (MoBA, its own block included) or keys (DeepSeek Sparse Attention) each query "
                    "keeps. As many as there are gives dense attention exactly.")),
    Setting("mla_rank", "int", "mla_rank", label=N_("Latent rank r (MLA; 0 = off)"), section=N_("Scores"), widget="number",
            limits=lambda v: (0, v["d_model"]), widget_limits=(0, LIMITS["max_d_model"]), written="changed",
            help=N_("Multi-head latent attention (DeepSeek-V2): keys and values are up-projected from one latent of "
            "r numbers per token, which is all the decoder caches (plus the RoPE part).")),
    Setting("mla_rope", "int", "mla_rope", label=N_("Decoupled RoPE dims per head (MLA)"), section=N_("Scores"),
            widget="number", default=_mla_rope_default, limits=lambda v: (0, max(v["d_model"] // v["heads"] - 1, 0)),
            widget_limits=(0, LIMITS["max_d_model"] - 1), applies=lambda v: bool(v["mla_rank"]), written="changed",
            help=N_("With RoPE, MLA turns only these last features of each query head and one key part shared by "
            "every head; the latent's keys stay unturned so W_UK can be folded into the query.")),
    Setting("mask", "choice", "mask", label=N_("Mask"), section=N_("Scores"), widget="select", choices=MASK_LABELS,
            short_choices=MASK_SHORT_LABELS, note=causal_cross_note),
    Setting("valid_len", "int", "valid_len", label=N_("Valid length (keys that are real)"), short_label=N_("Valid length"),
            section=N_("Scores"),
            widget="slider", default=lambda v: len(key_tokens(v)), limits=lambda v: (0, len(key_tokens(v))),
            applies=lambda v: v["mask"] == "padding"),
    Setting("window", "int", "window", label=N_("Window radius |i − j| ≤"), short_label=N_("Window"), section=N_("Scores"),
            widget="slider",
            limits=(0, LIMITS["max_tokens"]), widget_limits=lambda v: (0, max(len(key_tokens(v)) - 1, 1)),
            applies=lambda v: v["mask"] == "window", kept_unused=True),
    Setting("custom_mask", "grid", "custom_mask", url="cmask", section=N_("Scores"), widget="grid",
            applies=lambda v: v["mask"] == "custom"),
)

# What is on screen rather than computed; in links too, only where not the default. ``values`` are the
# model's settings (a page draws these widgets, except the presentation toggle).
VIEW_SETTINGS: tuple[Setting, ...] = (
    Setting("view", "choice", default="weights", choices=SHORT_VIEW_LABELS, written="changed"),
    Setting("avg", "flag", default=False, written="changed"),
    Setting("colours", "choice", default="fixed", choices=COLOUR_RANGE_LABELS, written="changed"),
    Setting("head", "int", default=0, limits=lambda v: (0, v["heads"] - 1), written="changed"),
    Setting("qi", "int", default=0, limits=lambda v: (0, len(v["tokens"]) - 1), written="changed"),
    Setting("kj", "int", default=0, limits=lambda v: (0, len(key_tokens(v)) - 1), written="changed"),
    Setting("present", "flag", default=False, written="changed"),
    Setting("nums", "choice", label=N_("Numbers in the cells"), default="auto", choices=NUMBERS_LABELS,
            written="changed"),
    Setting("knock", "heads", default=(), written="changed"),  # heads knocked out on the Heads page, e.g. 0,2
)

# The interface's language (ui/i18n/): in a link only where not English; drawn in the sidebar on every page
# (ui/widgets/language.py). A link without it gets the browser's language; an unknown one a message and English.
LANGUAGE = Setting("lang", "choice", label=N_("Language"), default=DEFAULT_LANGUAGE, choices=LANGUAGE_LABELS,
                   legacy={"zh": "zh-CN", "zh_CN": "zh-CN", "zh-cn": "zh-CN"}, written="changed")

VIEW_DEFAULTS = MappingProxyType({row.name: row.default for row in VIEW_SETTINGS})


def view_setting(name: str) -> Setting:
    """The view setting called ``name``."""
    return next(row for row in VIEW_SETTINGS if row.name == name)


def model_settings() -> tuple[Setting, ...]:
    """The model's settings (read at call time, so a test may extend the table)."""
    return SETTINGS


def model_setting(name: str) -> Setting:
    """The model's setting called ``name``."""
    return next(row for row in model_settings() if row.name == name)


def values_of(config: MHAConfig) -> dict[str, object]:
    """A configuration as the settings' values, by setting name."""
    return {row.name: getattr(config, row.field) for row in model_settings()}


def config_of(values: Values, **extra) -> MHAConfig:
    """The configuration the settings' values describe; a row that does not apply keeps its default."""
    chosen = {}
    for row in model_settings():
        if row.applies(values) or row.kept_unused:
            chosen[row.field] = values[row.name]
    return CONFIG_CLASS(**chosen, **extra)
