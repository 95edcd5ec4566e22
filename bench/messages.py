"""Every message of one Seed + run, as the browser receives them: where each goes, what it is, its size.

The browser takes a run's messages one at a time, and the server spends much of a run inside Streamlit's element
calls (README, Performance), so the number of elements a page sends per run is worth reading before its timings:

    python -m bench.messages step_by_step          # one line per message, then a count by area and kind
    python -m bench.messages heads --summary       # the counts only
    python -m bench.messages --floor "floor+one element"   # a floor page of bench/bench_livechart.py instead of the app

One server on loopback, one protocol client (``bench/st_client.py``): it opens the page from a link (``--query``),
then presses Seed + once and records that run's ForwardMsgs.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
from pathlib import Path

from bench.bench_livechart import FLOORS
from bench.one_element_controls import KEY as ONE_ELEMENT  # the controls as one element: its seed is a trigger
from bench.st_client import SEED_KEY, StreamlitClient
from tools.launch import app_command, free_port, run_coroutine, running_server

SIDEBAR = 1  # a delta's path starts with its root container: 0 the main area, 1 the sidebar


def kind_of(message) -> tuple[str, str]:
    """(area, kind) of one ForwardMsg: an element's or block's type and where it goes, or the message's own type."""
    kind = message.WhichOneof("type")
    if kind != "delta":
        return "-", kind
    delta = message.delta
    what = delta.WhichOneof("type")
    if what == "new_element":
        what = delta.new_element.WhichOneof("type")
    elif what == "add_block":
        what = "block:" + (delta.add_block.WhichOneof("type") or "")
    path = list(message.metadata.delta_path)
    return ("sidebar" if path and path[0] == SIDEBAR else "main"), what


async def one_seed_run(url: str, page: str, query: str) -> list[tuple[str, str, int]]:
    """(area, kind, bytes) of every ForwardMsg of one Seed + run after the page has opened."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    client = StreamlitClient(url)
    await client.connect()
    seen: list[tuple[str, str, int]] = []
    receive = client.websocket.recv

    async def recorded():  # the client's own reading, every message noted on the way
        raw = await receive()
        message = ForwardMsg()
        message.ParseFromString(raw)
        seen.append((*kind_of(message), len(raw)))
        return raw

    try:
        await client.open_page(query, page)
        seen.clear()
        client.websocket.recv = recorded
        if client.has_control(SEED_KEY):  # the app's settings element, or a floor page's st.number_input
            await client.set_widget(SEED_KEY, 4_321)  # a seed no link of the bench opens with
        else:  # the prototype's element: a link parameter and its value as a link spells it
            await client.trigger(ONE_ELEMENT, "change", {"name": "seed", "value": "4321"})
    finally:
        await client.close()
    return seen


def counts(seen: list[tuple[str, str, int]]) -> list[tuple[str, str, int, int]]:
    """(area, kind, messages, bytes), most messages first."""
    number, size = collections.Counter(), collections.Counter()
    for area, kind, length in seen:
        number[area, kind] += 1
        size[area, kind] += length
    return [(area, kind, n, size[area, kind]) for (area, kind), n in number.most_common()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", nargs="?", default="", help="the page's URL path (heads, step_by_step, ...)")
    parser.add_argument("--query", default="", help="the link's query string, without '?'")
    parser.add_argument("--summary", action="store_true", help="only the counts by area and kind")
    parser.add_argument("--floor", choices=sorted(FLOORS), help="serve this floor page of the livechart bench")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as directory:
        script = Path(directory) / "floor_app.py"
        if args.floor:
            script.write_text(FLOORS[args.floor])
        command = app_command(port, script) if args.floor else app_command(port)
        with running_server(command, port, Path(directory) / "server.log") as (server, _):
            seen = run_coroutine(one_seed_run(server.url, args.page, args.query))
    if not args.summary:
        for index, (area, kind, length) in enumerate(seen):
            print(f"{index:4d}  {area:8s} {kind:28s} {length:7d} B")
    areas = collections.Counter(area for area, _kind, _length in seen)
    print(f"\n{len(seen)} messages, {sum(length for *_, length in seen) / 1024:.1f} kB: "
          + ", ".join(f"{area} {n}" for area, n in areas.most_common()))
    for area, kind, n, size in counts(seen):
        print(f"{n:4d}  {area:8s} {kind:28s} {size / 1024:8.1f} kB")


if __name__ == "__main__":
    main()
