"""Light Streamlit clients: simulated students that speak Streamlit's own websocket protocol.

A browser talks to a Streamlit server over one websocket, ``/_stcore/stream``: it sends
``BackMsg`` protobufs (a ``rerun_script`` carrying a ``ClientState``: the URL's query string, the
page, and the state of every widget it changed) and receives ``ForwardMsg`` protobufs (deltas that
build the page, the app's address element with the address bar's new query string, and ``script_finished`` at the
end of a run). The protobuf classes ship with streamlit (``streamlit.proto``), so a client that
sends the same messages costs the server exactly what a browser costs it, and costs this machine
only a protobuf parse: hundreds of students fit in one asyncio process.

A widget's id is chosen by the server (``$$ID-<hash>-<key>``); the client reads it from the
element that carries it in the first run's deltas, finding it by the widget's key (every control
of this app has an explicit ``w_`` key). The settings' controls (the seed among them) are not widgets but ONE
components-v2 element (key ``controls``, ui/widgets/controls.py): the client reads the keys of the controls it
draws from its data, and changes one as the element's JavaScript does, with the element's ``change`` trigger
``{key, value}``. ``set_widget`` does either, by what the page drew (a floor page of the bench draws a plain
``st.number_input(key="w_seed")``).

    python -m bench.st_client --url http://127.0.0.1:8501 --students 20 --period 5 --duration 30
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import time
import uuid
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np

from ui.widgets.controls import KEY as CONTROLS  # the settings' one element (its controls: ``{key, value}`` changes)

RUN_TIMEOUT_S = 30.0  # a run that takes longer is an error (a timeout)
SEED_KEY = "w_seed"  # the control every simulated student changes
AFFINITY_COOKIE = "mha_route"  # the cookie deploy/nginx.conf hashes on (ignored by a bare server)
JITTER = 0.2  # a student's pause between changes: period * uniform(1 - JITTER, 1 + JITTER)


@dataclass(frozen=True)
class Trigger:
    """A components-v2 element's trigger, as its JavaScript's ``setTriggerValue(event, value)`` sends it."""

    event: str
    value: object


@dataclass
class RunResult:
    """What one script run sent back."""

    ms: float  # from sending the BackMsg to the script_finished ForwardMsg
    exceptions: list[str]  # text of every exception element in the run's deltas
    status: int  # ForwardMsg.ScriptFinishedStatus
    bytes: int  # the run's ForwardMsg bytes
    messages: int = 0  # the run's ForwardMsgs (each element and block is one)


@dataclass
class StudentResult:
    """What one simulated student saw; filled in as it goes, so a student cut by the clock still counts."""

    open_ms: float | None = None
    latencies: list[float] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    timeouts: int = 0
    failure: str | None = None  # could not connect, or the connection dropped
    bytes: int = 0

    @property
    def errors(self) -> int:
        """Timeouts, exception elements and a dropped or refused connection."""
        return self.timeouts + len(self.exceptions) + (self.failure is not None)


def stream_url(base_url: str) -> str:
    """``http://host:port[/prefix]`` -> ``ws://host:port[/prefix]/_stcore/stream``."""
    parts = urlsplit(base_url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    return f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}/_stcore/stream"


def element_widget_id(element) -> str | None:
    """The widget id an Element proto carries (None for elements that are not widgets)."""
    kind = element.WhichOneof("type")
    if kind is None:
        return None
    return getattr(getattr(element, kind), "id", None) or None


def exception_text(element) -> str | None:
    """``"Type: message"`` for an exception element, None for any other element."""
    if element.WhichOneof("type") != "exception":
        return None
    return f"{element.exception.type}: {element.exception.message}"[:300]


class StreamlitClient:
    """One Streamlit session over one websocket: what a browser tab does, without drawing anything."""

    def __init__(self, base_url: str, cookie: str | None = None):
        self.url = stream_url(base_url)
        self.cookie = cookie or uuid.uuid4().hex  # one affinity cookie per session, as a browser would get
        self.websocket = None
        self.query_string = ""
        self.address = ""  # the query the app's address element last put in the address bar
        self.page_script_hash = ""
        self.page_name = ""
        self.widget_ids: dict[str, str] = {}  # user key -> server widget id, from the deltas
        self.fragment_ids: dict[str, str] = {}  # user key -> the st.fragment a widget is drawn in, if any
        self.controls: dict[str, object] = {}  # the settings element's controls: key -> value, as it last drew them

    async def connect(self) -> None:
        """Open the websocket (subprotocol "streamlit", as the browser asks for)."""
        import websockets

        self.websocket = await websockets.connect(
            self.url,
            subprotocols=["streamlit"],
            additional_headers={"Cookie": f"{AFFINITY_COOKIE}={self.cookie}"},
            max_size=None,
            open_timeout=RUN_TIMEOUT_S,
            ping_interval=None,  # the server's own keep-alive is enough on loopback
        )

    async def close(self) -> None:
        """Close the websocket (the server ends the session)."""
        if self.websocket is not None:
            with contextlib.suppress(Exception):
                await self.websocket.close()

    async def open_page(self, query_string: str = "", page_name: str = "") -> RunResult:
        """The first run of a page, as opening a shared link does (``page_name`` is the URL path, e.g. "about")."""
        self.query_string = query_string.lstrip("?")
        self.page_name = page_name
        self.page_script_hash = ""  # the server finds the page by name, then tells its hash
        return await self.rerun({})

    def has_control(self, key: str) -> bool:
        """True when the page drew a control of key ``key``: a Streamlit widget, or a control of the settings' element."""
        return key in self.widget_ids or key in self.controls

    async def set_widget(self, key: str, value: int | float | str | bool) -> RunResult:
        """Change the control with user key ``key`` to ``value`` and wait for the rerun to finish: a Streamlit widget
        by its id, or a control of the settings' element by the element's ``change`` trigger (as its JavaScript)."""
        if key in self.widget_ids:
            return await self.rerun({self.widget_ids[key]: value}, self.fragment_ids.get(key, ""))
        if key in self.controls:
            run = await self.trigger(CONTROLS, "change", {"key": key, "value": value})
            if not run.exceptions and self.controls.get(key) != value:  # a change the server ignored: not a change
                raise RuntimeError(f"the settings element did not take {key}={value!r}: it shows "
                                   f"{self.controls.get(key)!r}")
            return run
        raise KeyError(f"no widget or control with key {key!r} on this page; seen: "
                       f"{sorted(self.widget_ids)}, in {CONTROLS!r}: {sorted(self.controls)}")

    async def trigger(self, key: str, event: str, value: object) -> RunResult:
        """Send the components-v2 element with user key ``key`` the trigger ``event`` with ``value`` (its
        ``setTriggerValue``; the trigger's id is Streamlit's, made from the element's) and wait for the rerun."""
        from streamlit.components.v2.bidi_component.main import _make_trigger_id

        if key not in self.widget_ids:
            raise KeyError(f"no element with key {key!r} on this page; seen: {sorted(self.widget_ids)}")
        return await self.rerun({_make_trigger_id(self.widget_ids[key], "events"): Trigger(event, value)})

    async def rerun(self, widgets: dict[str, int | float | str | bool | Trigger], fragment_id: str = "") -> RunResult:
        """Send one rerun_script BackMsg and read ForwardMsgs up to its script_finished.

        ``fragment_id``: the fragment of the changed widget; the browser sends it too, and the server
        then reruns only that fragment.
        """
        from streamlit.proto.BackMsg_pb2 import BackMsg

        message = BackMsg()
        state = message.rerun_script
        state.query_string = self.query_string
        state.page_script_hash = self.page_script_hash
        state.page_name = self.page_name if not self.page_script_hash else ""
        state.fragment_id = fragment_id
        for widget_id, value in widgets.items():
            set_widget_value(state.widget_states.widgets.add(), widget_id, value)
        start = time.perf_counter()
        await self.websocket.send(message.SerializeToString())
        return await asyncio.wait_for(self.read_run(start), timeout=RUN_TIMEOUT_S)

    async def read_run(self, start: float) -> RunResult:
        """Read ForwardMsgs until script_finished; remember widget ids, the query string and the page."""
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        exceptions: list[str] = []
        received = messages = 0
        while True:
            raw = await self.websocket.recv()
            received += len(raw)
            messages += 1
            forward = ForwardMsg()
            forward.ParseFromString(raw)
            kind = forward.WhichOneof("type")
            if kind == "delta" and forward.delta.WhichOneof("type") == "new_element":
                self.note_element(forward.delta.new_element, exceptions, forward.delta.fragment_id)
            elif kind == "page_info_changed":
                self.query_string = forward.page_info_changed.query_string
            elif kind == "new_session" and forward.new_session.page_script_hash:
                self.page_script_hash = forward.new_session.page_script_hash
            elif kind == "navigation" and forward.navigation.page_script_hash:
                self.page_script_hash = forward.navigation.page_script_hash
            elif kind == "script_finished":
                status = forward.script_finished
                if status != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                    return RunResult((time.perf_counter() - start) * 1e3, exceptions, status, received, messages)

    def note_element(self, element, exceptions: list[str], fragment_id: str = "") -> None:
        """Record a widget's id (and its fragment) under its user key, or an exception's text; and the keys of the
        controls the settings' element draws."""
        widget_id = element_widget_id(element)
        if widget_id and widget_id.startswith("$$ID-") and widget_id.count("-") >= 2:
            key = widget_id.split("-", 2)[2]  # "$$ID-<hash>-<key>"
            self.widget_ids[key] = widget_id
            self.fragment_ids[key] = fragment_id
            if key == CONTROLS and element.WhichOneof("type") == "bidi_component":
                items = json.loads(element.bidi_component.json or "{}").get("items", [])
                self.controls = {item["key"]: item["value"] for item in items if "value" in item}  # no heading
        text = exception_text(element)
        if text:
            exceptions.append(text)
        if element.WhichOneof("type") == "bidi_component" and element.bidi_component.component_name.endswith(
                "mha_address"):  # the app's address bar (ui/widgets/address.py); the browser keeps sending its query
            self.address = json.loads(element.bidi_component.json)["query"]


def set_widget_value(widget_state, widget_id: str, value) -> None:
    """Fill a WidgetState proto the way the browser does for a widget of this value's type."""
    widget_state.id = widget_id
    if isinstance(value, Trigger):  # the browser sends a list of {event, value}, one per trigger fired
        widget_state.json_trigger_value = json.dumps([{"event": value.event, "value": value.value}])
    elif isinstance(value, bool):
        widget_state.bool_value = value
    elif isinstance(value, int):
        widget_state.int_value = value
    elif isinstance(value, float):
        widget_state.double_value = value
    else:
        widget_state.string_value = str(value)


def record(result: StudentResult, run: RunResult, opening: bool) -> None:
    """Add one run to a student's result."""
    result.bytes += run.bytes
    result.exceptions.extend(run.exceptions)
    if opening:
        result.open_ms = run.ms
    else:
        result.latencies.append(run.ms)


async def student(base_url: str, index: int, period_s: float, until: float, result: StudentResult,
                  query: str = "", page_name: str = "") -> None:
    """One student: opens the shared link at a random moment of the first period, then changes the seed every ~period."""
    rng = random.Random(index)
    await asyncio.sleep(rng.uniform(0, period_s))
    client = StreamlitClient(base_url)
    try:
        await client.connect()
        record(result, await client.open_page(query, page_name), opening=True)
        seed = 1000 * (index + 1)  # a seed range of its own: the cache cannot answer for another student
        while time.perf_counter() + period_s * (1 - JITTER) < until:
            await asyncio.sleep(period_s * rng.uniform(1 - JITTER, 1 + JITTER))
            seed += 1
            try:
                record(result, await client.set_widget(SEED_KEY, seed), opening=False)
            except TimeoutError:
                result.timeouts += 1
                return  # the session is behind; its remaining changes would queue
    except Exception as error:  # refused, dropped, or a page without the control
        result.failure = f"{type(error).__name__}: {str(error)[:200]}"
    finally:
        await client.close()


async def classroom(base_url: str, students: int, period_s: float, duration_s: float,
                    query: str = "", page_name: str = "") -> list[StudentResult]:
    """``students`` students on one server for ``duration_s`` seconds (cut at duration + RUN_TIMEOUT_S)."""
    results = [StudentResult() for _ in range(students)]
    until = time.perf_counter() + duration_s
    tasks = [student(base_url, i, period_s, until, results[i], query, page_name) for i in range(students)]
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=duration_s + RUN_TIMEOUT_S)
    return results


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (linear interpolation), or None for no values."""
    return float(np.percentile(values, q)) if values else None


def summary(results: list[StudentResult], wall_s: float) -> dict:
    """Counts, the achieved change rate and latency percentiles of one classroom."""
    latencies = [ms for result in results for ms in result.latencies]
    opens = [result.open_ms for result in results if result.open_ms is not None]
    failures = sorted({result.failure for result in results if result.failure})
    row = {
        "students": len(results),
        "changes": len(latencies),
        "rate_per_s": len(latencies) / wall_s if wall_s > 0 else 0.0,
        "errors": sum(result.errors for result in results),
        "exceptions": sum(len(result.exceptions) for result in results),
        "timeouts": sum(result.timeouts for result in results),
        "disconnects": len([result for result in results if result.failure]),
        "open_p50_ms": percentile(opens, 50),
        "p50_ms": percentile(latencies, 50),
        "p95_ms": percentile(latencies, 95),
        "max_ms": max(latencies, default=None),
        "kb_per_change": sum(result.bytes for result in results) / 1024 / max(len(latencies) + len(opens), 1),
    }
    if failures:
        row["note"] = "; ".join(failures)[:300]
    return row


def run_classroom(base_url: str, students: int, period_s: float, duration_s: float,
                  query: str = "", page_name: str = "") -> dict:
    """Run one classroom in an event loop of its own and summarize it."""
    from tools.launch import run_coroutine  # works beside a running loop too

    start = time.perf_counter()
    results = run_coroutine(classroom(base_url, students, period_s, duration_s, query, page_name))
    return summary(results, time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the app's base URL (a server or the proxy), loopback")
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--period", type=float, default=5.0, help="seconds between one student's changes")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of changes")
    parser.add_argument("--query", default="", help="the shared link's query string, e.g. heads=2")
    args = parser.parse_args()
    if urlsplit(args.url).hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("load is for loopback only: give a 127.0.0.1 URL")
    if not 1 <= args.students <= 2000 or not 0 < args.duration <= 600:
        parser.error("students must be 1..2000 and duration 0..600 s (bounded load)")
    for key, value in run_classroom(args.url, args.students, args.period, args.duration, args.query).items():
        print(f"{key:>14}: {value:.1f}" if isinstance(value, float) else f"{key:>14}: {value}")


if __name__ == "__main__":
    main()
