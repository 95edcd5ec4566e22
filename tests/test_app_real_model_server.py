"""The Real model page on a real server, over Streamlit's own websocket protocol (bench/st_client.py).

AppTest always reruns the whole script, so only a server shows what the page's fragment does: a
layer or head change reruns the part below the sentence, not the page. What is checked: that run
sends the new layer's grid (compared with the model's own attention), moves the URL along (its own address
element: app.py's is not drawn in a fragment's rerun), and
does not send the page's title again; a new sentence still reruns the whole page.
"""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs

import numpy as np
import pytest
from shown_charts import LIVE_COMPONENT

from bench.st_client import StreamlitClient
from tools.launch import run_coroutine, streamlit_server
from ui.pages.real_model import DEFAULT_SENTENCE

ATOL = 1e-6  # float32 figure against the float32 model: only the JSON round trip between them


class RecordingClient(StreamlitClient):
    """A client that keeps every element of the last run."""

    def __init__(self, base_url: str):
        super().__init__(base_url)
        self.elements = []

    def note_element(self, element, exceptions: list[str], fragment_id: str = "") -> None:
        super().note_element(element, exceptions, fragment_id)
        self.elements.append(element)

    async def run(self, step):
        self.elements = []
        result = await step
        assert not result.exceptions, result.exceptions
        return self.elements

    def params(self) -> dict[str, str]:
        """The address bar after the last run: the query the address element of that run carries
        (``ui/widgets/address.py``; a fragment's rerun draws its own)."""
        found = [e.bidi_component for e in self.elements if e.WhichOneof("type") == "bidi_component"
                 and e.bidi_component.component_name.endswith("mha_address")]
        assert len(found) == 1, len(found)
        return {name: values[0] for name, values in parse_qs(json.loads(found[0].json)["query"]).items()}


def titles(elements) -> list[str]:
    return [e.heading.body for e in elements if e.WhichOneof("type") == "heading"]


def chart_key(element) -> str | None:
    """The widget key of a chart element, st.plotly_chart's or a live chart's (ui/widgets/live.py); None otherwise."""
    kind = element.WhichOneof("type")
    if kind == "plotly_chart" or (kind == "bidi_component" and element.bidi_component.component_name == LIVE_COMPONENT):
        return getattr(element, kind).id.rsplit("-", 1)[-1]
    return None


def chart_spec(element) -> dict:
    """The figure a chart element carries: a plotly_chart's spec, or a live chart's payload after its settings line."""
    if element.WhichOneof("type") == "plotly_chart":
        return json.loads(element.plotly_chart.spec)
    return json.loads(bytes(element.bidi_component.bytes).partition(b"\n")[2])


def grid(elements) -> np.ndarray:
    """The all-heads grid of a run's elements, stacked (nh, T, T)."""
    spec = next(chart_spec(e) for e in elements if chart_key(e) == "rm_grid")
    return np.stack([np.frombuffer(base64.b64decode(t["z"]["bdata"]), t["z"]["dtype"]).reshape(
        [int(n) for n in str(t["z"]["shape"]).split(",")]) for t in spec["data"]])


@pytest.fixture(scope="module")
def server_url(tmp_path_factory, model):
    with streamlit_server(tmp_path_factory.mktemp("real_model_server")) as server:
        yield server.url


async def session(url: str):
    client = RecordingClient(url)
    await client.connect()
    try:
        opened = await client.run(client.open_page("", "real_model"))
        layer = await client.run(client.set_widget("w_rm_layer", "layer 3"))  # a radio sends its label
        layer_params = client.params()
        sentence = await client.run(client.set_widget("w_rm_text", "Fish swim fast."))
        return opened, layer, layer_params, sentence
    finally:
        await client.close()


def test_a_layer_change_reruns_only_the_part_below_the_sentence(server_url, model):
    opened, layer, params, sentence = run_coroutine(session(server_url))
    page_title = "Real model: all-MiniLM-L6-v2"
    assert page_title in titles(opened)
    np.testing.assert_allclose(grid(opened), model.attentions(DEFAULT_SENTENCE)[0], atol=ATOL, rtol=0)

    assert page_title not in titles(layer)  # the fragment ran, not the page
    assert any(title.startswith("Layer 3:") for title in titles(layer))
    np.testing.assert_allclose(grid(layer), model.attentions(DEFAULT_SENTENCE)[3], atol=ATOL, rtol=0)
    assert (params["rm_layer"], params["rm_text"]) == ("3", DEFAULT_SENTENCE)

    assert page_title in titles(sentence)  # a new sentence reruns the page, keeping the layer
    np.testing.assert_allclose(grid(sentence), model.attentions("Fish swim fast.")[3], atol=ATOL, rtol=0)
