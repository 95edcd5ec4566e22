"""The notebook reads a link's page as the app does: Heads and Step by step links become their notebook; a link to
any other page of the app (FlashAttention, Compare, Seed notebooks, Real model, ...) is refused with a message
naming that page and what a notebook covers, never read as Heads with the page kept in the base URL; a parameter
the page does not read is reported, not silently dropped."""

import pytest

from ui.state import notebook_link
from ui.state.navigation import PAGES
from ui.state.notebook_link import NOTEBOOK_COVERS, NOTEBOOK_PAGES, NotANotebookLink, parse_link
from ui.state.urlstate import config_from_params

OTHER_PAGES = [info for info in PAGES if info.name not in NOTEBOOK_PAGES]


@pytest.mark.parametrize(("text", "page", "app_url"), [
    ("http://localhost:8501/?tokens=a+b", "heads", "http://localhost:8501"),
    ("http://localhost:8501/heads?tokens=a+b", "heads", "http://localhost:8501"),
    ("http://localhost:8501/step_by_step?tokens=a+b&head=1", "step_by_step", "http://localhost:8501"),
    ("https://school.example/mha/step_by_step?tokens=a+b", "step_by_step", "https://school.example/mha"),
    ("https://school.example/mha?tokens=a+b", "heads", "https://school.example/mha"),  # an app served under /mha
    ("step_by_step?tokens=a+b", "step_by_step", notebook_link.DEFAULT_APP_URL),
    ("?tokens=a+b&view=logits", "heads", notebook_link.DEFAULT_APP_URL),
    ("tokens=a+b", "heads", notebook_link.DEFAULT_APP_URL),
])
def test_heads_and_step_by_step_links_are_read_as_their_page(text, page, app_url):
    link = parse_link(text)
    assert (link.page, link.app_url, link.params["tokens"], link.notes) == (page, app_url, "a b", ())


@pytest.mark.parametrize("info", OTHER_PAGES, ids=lambda info: info.name)
@pytest.mark.parametrize("form", ["http://localhost:8501/{page}?tokens=a+b&heads=2", "{page}?tokens=a+b&heads=2"])
def test_a_link_to_another_page_is_refused_naming_the_page_and_what_a_notebook_covers(info, form):
    with pytest.raises(NotANotebookLink) as refused:
        parse_link(form.format(page=info.name))
    message = str(refused.value)
    assert f"link to the {info.title} page" in message
    assert NOTEBOOK_COVERS in message
    assert "http://localhost:8501/step_by_step?tokens=a+b&heads=2" in message  # the same settings, with a notebook


def test_the_command_line_refuses_a_flash_link_instead_of_writing_a_heads_notebook(capsys):
    assert notebook_link.main(["http://localhost:8501/flash?tokens=a+b&tile=2"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: this is a link to the FlashAttention page, which has no notebook")


def test_a_page_link_without_model_settings_says_where_the_notebook_button_is():
    with pytest.raises(NotANotebookLink, match="Compare A/B page.*Notebook \\(.ipynb\\) button"):
        parse_link("compare?a_tokens=x")


def test_a_name_that_is_no_page_of_the_app_is_refused():
    with pytest.raises(NotANotebookLink, match="'flsh' is not a page of the app"):
        parse_link("flsh?tokens=a+b")


def test_a_parameter_the_page_does_not_read_is_reported_in_the_notebook_and_on_the_command_line(capsys):
    text = "http://localhost:8501/step_by_step?tokens=a+b+c&token=x&heads=3&d_model=8"
    nb, messages = notebook_link.notebook_for_link(text)
    _, repairs = config_from_params({"tokens": "a b c", "heads": "3", "d_model": "8"})
    note = "`token` is not a parameter of the Step by step page: the app ignores it, and so does this notebook."
    assert messages == [note, *repairs]
    assert note in nb.cells[0].source
    assert "/step_by_step?" in nb.cells[-1].source  # the link back is to the page the link named
    assert notebook_link.main([text]) == 0
    assert f"note: {note}" in capsys.readouterr().err
