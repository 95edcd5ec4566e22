"""Labels read from a table of records at each use, so a row added to the table reaches every widget,
link reader and heading that lists the table's labels, with no other edit."""

from __future__ import annotations

from collections.abc import Mapping


class RecordLabels(Mapping):
    """Name -> ``getattr(table[name], attribute)``, live: ``RecordLabels(SCHEMES, "short_label")``."""

    def __init__(self, table: Mapping, attribute: str) -> None:
        self.table = table
        self.attribute = attribute

    def __getitem__(self, name: str) -> str:
        return getattr(self.table[name], self.attribute)

    def __iter__(self):
        return iter(self.table)

    def __len__(self) -> int:
        return len(self.table)
