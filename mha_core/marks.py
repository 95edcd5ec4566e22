"""``N_``: marks a string for translation where it is written, without translating it.

The engine never imports the interface, so its records (labels, descriptions) are marked with ``N_`` and stay
English here; Babel extracts them (``babel.cfg``), and ``ui`` translates them with ``_()`` where it shows them.
"""

from __future__ import annotations


def N_(text: str) -> str:  # noqa: N802 (gettext's conventional name)
    """``text`` unchanged: the mark tells ``pybabel extract`` to put it in the catalogs."""
    return text


class Message(str):
    """An English sentence with runtime values that remembers how it was made, so the interface can translate it.

    ``Message(N_("d_model {d} is not divisible by {n} heads"), d=16, n=3)`` *is* the English text (a ``str``: code
    and tests that compare, join or raise it read English), and keeps its ``template`` and ``values``;
    ``ui.i18n._`` translates the template and then formats it. A value that is itself a ``Message`` (a marked
    phrase: ``Message(N_("linear attention"))``) is translated too; any other value (numbers, names) stays.
    """

    template: str
    values: dict[str, object]
    capital: bool  # first letter upper-case in every language (a title that starts with a name)

    def __new__(cls, template: str, /, **values: object) -> Message:
        return _made(template, values, False)

    def __reduce_ex__(self, protocol):  # pickling (st.cache_data, session state) makes it again from its parts
        return _made, (self.template, self.values, self.capital)

    def capitalised(self) -> Message:
        """The same message with its first letter upper-case, in every language."""
        return _made(self.template, self.values, True)

    def translate(self, gettext) -> str:
        """The message in the language of ``gettext`` (a function msgid -> text), its values formatted in."""
        values = {name: value.translate(gettext) if isinstance(value, Message) else value
                  for name, value in self.values.items()}
        return _upper_first(gettext(self.template).format(**values), self.capital)


def _upper_first(text: str, capital: bool) -> str:
    return text[:1].upper() + text[1:] if capital else text


def _made(template: str, values: dict[str, object], capital: bool) -> Message:
    text = str.__new__(Message, _upper_first(template.format(**values), capital))
    text.template, text.values, text.capital = template, dict(values), capital
    return text
