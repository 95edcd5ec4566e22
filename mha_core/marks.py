"""``N_``: marks a string for translation where it is written, without translating it.

The engine never imports the interface, so its records (labels, descriptions) are marked with ``N_`` and stay
English here; Babel extracts them (``babel.cfg``), and ``ui`` translates them with ``_()`` where it shows them.
"""


def N_(text: str) -> str:  # noqa: N802 (gettext's conventional name)
    """``text`` unchanged: the mark tells ``pybabel extract`` to put it in the catalogs."""
    return text
