"""Step by step with a differential kernel gives the paper's reason for normalising each head (Ye et al. 2024,
Differential Transformer, section 2.2): the heads' patterns are sparser and their statistics differ from head to
head, so each head is normalised on its own (GroupNorm), with the fixed factor 1 − λ_init, to keep training stable.
Not an invented one ("puts the scale right", "comparable although their weights no longer sum to 1")."""

from tests.test_app_step_by_step import open_page


def page_text(at) -> str:
    return "\n".join(element.value for kind in ("subheader", "markdown", "caption", "info") for element in at.get(kind)
                     if isinstance(getattr(element, "value", None), str))


def test_the_norm_step_gives_the_papers_reason():
    text = page_text(open_page(kernel="differential"))
    assert "Normalise each head, times 1 − λ_init" in text  # the step is on the page
    assert "puts the scale right" not in text
    assert "no longer sum to 1" not in text
    assert "sparser" in text
    assert "differ more from head to head" in text
    assert "keeps training stable" in text
    assert "GroupNorm" in text
