"""Seed notebooks: the five documents the project grew from, recomputed by our engine."""

import streamlit as st

from content.seeds import EXAMPLE_SEED, SEED_EXAMPLES, CaseComparison, SeedCase, SeedExample, compare
from ui.charts.numbers import column_format, table_values
from ui.i18n import _, sentences
from ui.pages.seeds import (
    check_lines,
    conventions_table,
    embedding_csv,
    explorer_summary,
    match_mark,
    overview_table,
    side_by_side,
)
from ui.state import navigation
from ui.state.urlstate import explorer_params
from ui.widgets.number_columns import number_columns
from ui.widgets.presentation import presentation_switch


@st.cache_resource(max_entries=64, show_spinner=False)
def seed_comparison(key: str, index: int) -> CaseComparison:
    """Case ``index`` of seed ``key`` run on our engine, once per server (a case holds lambdas: keyed by position).

    Shared by every session, so nothing below may change it.
    """
    return compare(SEED_EXAMPLES[key].cases[index])


def seed_comparisons(example: SeedExample) -> tuple[CaseComparison, ...]:
    """Every case of one seed, compared, in the seed's order."""
    return tuple(seed_comparison(example.key, index) for index in range(len(example.cases)))


def render_case(case: SeedCase, comparison: CaseComparison) -> None:
    st.markdown(f"#### {_(case.name)}")
    st.caption(_(case.description))
    st.markdown(f"**{match_mark(case, comparison)}**")
    for name in comparison.printed or {}:
        printed, ours, _gap = side_by_side(comparison, name)
        left, right = st.columns(2)
        with left:
            st.caption(_("`{name}` as the seed printed it ({decimals} decimals)").format(name=name, decimals=case.decimals))
            st.dataframe(table_values(printed, case.decimals),
                         column_config=number_columns(printed.columns, column_format(case.decimals)), hide_index=True)
        with right:
            st.caption(_("`{name}` from our engine (2 more decimals) · max |Δ| = {gap:.2g}").format(
                name=name, gap=comparison.max_abs_diff[name]))
            decimals = min(case.decimals + 2, 10)
            st.dataframe(table_values(ours, decimals), column_config=number_columns(ours.columns, column_format(decimals)),
                         hide_index=True)
    passed = sum(comparison.checks.values())
    with st.expander(
        _("Structural checks: {passed} of {checks} pass").format(passed=passed, checks=len(comparison.checks)),
        expanded=comparison.matches is None
    ):
        st.markdown("\n".join(f"- {line}" for line in check_lines(comparison.checks)))


def render_explorer_button(example: SeedExample) -> None:
    config = example.explorer
    if config is None:
        st.info(_("The explorer cannot express this seed's layer, so there is nothing to load."))
        return
    st.markdown(_("**In the explorer:** {summary}.").format(summary=explorer_summary(config)))
    # A link, not a button: one history entry with the explorer's address and every setting (Back returns here).
    st.page_link(navigation.page("heads"), label=_("Load these settings into the explorer"),
                 query_params=explorer_params(config), icon=":material/open_in_new:")
    csv = embedding_csv(config)
    if csv is not None:
        st.info(
            _("The button cannot carry the seed's input matrix. To use it, download it here, then in the sidebar "
              "choose Embeddings → uploaded matrix and upload the file.")
        )
        st.download_button(
            _("Download the seed's input matrix (CSV)"),
            csv,
            file_name=f"seed{example.key}_inputs.csv",
            mime="text/csv",
            key=f"seed_csv_{example.key}",
            on_click="ignore",
        )


def render_example(example: SeedExample, comparisons: tuple[CaseComparison, ...]) -> None:
    st.subheader(_(example.title))
    st.caption(_("Source: `{file}`").format(file=example.source_file))
    st.write(_(example.summary))
    st.table(conventions_table(example), hide_index=True)
    if example.reproducible:
        st.success(_(example.note).format(seed=EXAMPLE_SEED), icon=":material/check_circle:")
    else:
        st.warning(sentences(_("**Unseeded randomness.**"), _(example.note).format(seed=EXAMPLE_SEED)),
                   icon=":material/casino:")
    for case, comparison in zip(example.cases, comparisons, strict=True):
        render_case(case, comparison)
    st.divider()
    render_explorer_button(example)


def main() -> None:
    presentation_switch()
    st.title(_("Seed notebooks"))
    st.write(_(
        "Five documents wrote multi-head attention their own way. Each is rebuilt here from its own conventions and "
        "run through our engine; where the seed printed numbers from fixed or seeded inputs, ours sit beside them."
    ))
    comparisons = {key: seed_comparisons(example) for key, example in SEED_EXAMPLES.items()}
    st.table(overview_table(SEED_EXAMPLES, comparisons), hide_index=True)
    tabs = st.tabs([_("Seed {key}").format(key=key) for key in SEED_EXAMPLES])
    for tab, example in zip(tabs, SEED_EXAMPLES.values(), strict=True):
        with tab:
            render_example(example, comparisons[example.key])


main()
