"""The app's pages as data: name (the file ``app_pages/<name>.py`` and the URL path ``/<name>``), title, icon and
what each shows. No streamlit, so that tools outside the app (the notebook writer, the static pack) name the
pages as the app does; ``ui.state.navigation`` makes the ``st.Page`` objects from these rows."""

from __future__ import annotations

from dataclasses import dataclass

from ui.i18n import N_, _

PAGES_DIR = "app_pages"


@dataclass(frozen=True)
class PageInfo:
    """One page: its file name (without .py), title, icon, and a line saying what it shows.

    Icons are Material Symbols (``:material/<name>:``), a font Streamlit serves itself: an emoji is an empty box on
    a machine without an emoji font (Debian's Chromium)."""

    name: str
    title: str  # English, marked N_: translate with ``_()`` where shown (``label`` does)
    icon: str
    summary: str

    @property
    def path(self) -> str:
        """The page's file, relative to app.py: the one place this path is spelled."""
        return f"{PAGES_DIR}/{self.name}.py"

    @property
    def label(self) -> str:
        """A link text: the title and what the page shows, in the run's language."""
        return _("{title}: {summary}").format(title=_(self.title), summary=_(self.summary))


PAGES = (
    PageInfo("heads", N_("Heads"), ":material/grid_view:", N_("every head's attention at once")),
    PageInfo("step_by_step", N_("Step by step"), ":material/stairs:", N_("one head from embeddings to output, and a drill-down")),
    PageInfo("decoding", N_("Decoding"), ":material/fast_forward:", N_("generation token by token with a KV cache; positions compared")),
    PageInfo("flash", N_("FlashAttention"), ":material/bolt:", N_("attention tile by tile with the online softmax; the weights never stored")),
    PageInfo("lessons", N_("Lessons"), ":material/school:", N_("classic confusions and modern attention, one link each")),
    PageInfo("seeds", N_("Seed notebooks"), ":material/menu_book:", N_("the five seed documents, recomputed")),
    PageInfo("compare", N_("Compare A/B"), ":material/compare:", N_("two settings side by side, and their difference, in one link")),
    PageInfo("real_model", N_("Real model"), ":material/smart_toy:", N_("attention in a small pretrained model")),
    PageInfo("about", N_("About"), ":material/info:", N_("what the app computes and why")),
)
PAGE_INFO = {info.name: info for info in PAGES}
DEFAULT_PAGE = "heads"
