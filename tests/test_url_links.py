"""Every link that worked before the settings table still reads, and writes, exactly as it did.

``data/url_links_before_settings_table.json`` was written by ``data/make_url_links_fixture.py``
from the URL code as it was before ``ui/state/settings.py`` (commit 2bf5f30): for 150 links (the README's
example, every parameter of its table, good, bad and edge values) the configuration, the view, the
messages and the parameters written back.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mha_core.config import MHAConfig
from ui.pages.decoding.cache_policy import CACHE_SETTINGS
from ui.pages.flash import FLASH_SETTINGS
from ui.state.settings import LANGUAGE, SETTINGS, VIEW_DEFAULTS, VIEW_SETTINGS
from ui.state.urlstate import config_from_params, params_from_config, view_from_params, view_params

ROOT = Path(__file__).resolve().parents[1]
BEFORE = json.loads((ROOT / "tests" / "data" / "url_links_before_settings_table.json").read_text())
# Rows whose reading changed on purpose since (each with its reason), and rows added for a rule that changed.
CHANGED = json.loads((ROOT / "tests" / "data" / "url_links_changed_on_purpose.json").read_text())


NEW_FIELDS = ("pe", "rope_base", "kv_heads")  # added since the fixture (issue 12)


def as_json(config) -> dict:
    return json.loads(json.dumps(config.__dict__))


def old_fields(config) -> dict:
    """The configuration's fields that the fixture knows; the new ones must say what an old link meant."""
    record = as_json(config)
    new = {name: record.pop(name) for name in NEW_FIELDS}
    assert new["pe"] in ("none", "sinusoidal") and {**new, "pe": None} == {"pe": None, "rope_base": 10000.0, "kv_heads": None}
    record["positional_encoding"] = new["pe"] == "sinusoidal"  # the old field, gone since pe became one string
    return record


def today(message: str) -> str:
    """An old link's message as it reads now: ``pe`` became a choice whose old values 0 and 1 still read."""
    return re.sub(r"`pe=(.*)` must be 0 or 1: using 0\.",
                  r"`pe=\1` is not one of none, sinusoidal, rope, alibi: using none.", message)


def expected_now(link: str) -> dict:
    """The fixture's record of ``link``, with what changed on purpose since laid over it."""
    change = CHANGED["changed"].get(link, {})
    expected = {**BEFORE[link], **{k: v for k, v in change.items() if k != "config"}}
    return {**expected, "config": {**BEFORE[link]["config"], **change.get("config", {})}}


@pytest.mark.parametrize("link", list(BEFORE))
def test_a_link_reads_and_writes_as_before(link):
    expected = expected_now(link)
    config, messages = config_from_params(expected["params"])
    view, view_messages = view_from_params(expected["params"], config)
    actual = old_fields(config)
    assert {name: actual[name] for name in expected["config"]} == expected["config"]
    added = set(actual) - set(expected["config"])  # config fields added since: an old link opens them at their default
    assert {name: actual[name] for name in added} == {name: old_fields(MHAConfig())[name] for name in added}
    assert {name: view[name] for name in expected["view"]} == expected["view"]
    newer = set(view) - set(expected["view"])  # view settings added since: an old link opens them at their default
    assert {name: view[name] for name in newer} == {name: VIEW_DEFAULTS[name] for name in newer}
    # The same messages; a link with several bad values may list them in the sidebar's order.
    assert sorted(messages) == sorted(map(today, expected["messages"]))
    assert view_messages == expected["view_messages"]
    assert {**params_from_config(config), **view_params(view)} == expected["written"]


PAGE_SETTINGS = (*FLASH_SETTINGS, *CACHE_SETTINGS)  # a page's own link parameters (ui/state/page_params.py)


def test_the_readme_example_and_every_parameter_of_its_table_are_among_the_links():
    whole = (ROOT / "README.md").read_text()
    readme = whole[whole.index("## Links"):]  # the links section: the tables of other sections (a record's fields) are
    readme = readme[: readme.index("\n## ", 1)]  # not parameters
    example = re.search(r"Example: `\?([^`]+)`", readme).group(1)
    assert example in BEFORE
    table = set(re.findall(r"^\| `(\w+)`(?:, `(\w+)`)*(?:, `(\w+)`)? \|", readme, flags=re.M))
    # lesson: the Lessons page's own; kv_heads, rope_base: added after the fixture (issue 12, tested in test_app_decoding)
    names = {name for row in table for name in row if name} - {"lesson", "kv_heads", "rope_base"}
    names -= {"null", "colours", "knock"}  # added after the fixture too (issues 10, 13), tested in their app tests
    names -= {row.param for row in PAGE_SETTINGS}  # pages' own parameters, added since (tested in their app tests)
    names -= {"kernel", "mla_rank", "mla_rope"}  # issue 26, after the fixture: tested in tests/test_kernel_links.py
    names -= {LANGUAGE.param}  # issue 37, after the fixture: tested in tests/test_app_i18n.py
    names -= {"block", "topk"}  # issue 34, after the fixture: tested in tests/test_sparse_pages.py
    names -= {"nums"}  # issue 38, after the fixture: tested in tests/test_app_step_by_step_numbers.py
    names -= {name for name in names if name.startswith("rm_")}  # the Real model page's own (issues 35, 36): its app tests
    settings = {row.param for row in (*SETTINGS, *VIEW_SETTINGS, *PAGE_SETTINGS, LANGUAGE)}
    first_cells = re.findall(r"^\| ((?:`\w+`(?:, )?)+) \|", readme, flags=re.M)
    documented = {name for cell in first_cells for name in re.findall(r"`(\w+)`", cell)}
    assert settings <= documented, f"undocumented URL parameters: {settings - documented}"
    linked = {name for record in BEFORE.values() for name in record["params"]}
    assert names <= linked and {"tokens", "cmask", "emb", "kj"} <= names


def test_every_changed_row_is_a_row_of_the_fixture_and_says_why():
    assert set(CHANGED["changed"]) <= set(BEFORE)
    assert all(row["why"].startswith("issue ") for rows in CHANGED.values() for row in rows.values())


@pytest.mark.parametrize("link", list(CHANGED["new"]))
def test_a_new_row_reads_and_writes_as_recorded(link):
    expected = CHANGED["new"][link]
    config, messages = config_from_params(expected["params"])
    view, _ = view_from_params(expected["params"], config)
    assert {name: getattr(config, name) for name in expected["config"]} == expected["config"]
    assert messages == expected["messages"]
    assert {**params_from_config(config), **view_params(view)} == expected["written"]
