"""How a figure goes to the browser: kept as the plain plotly dictionaries it was built from.

The figure builders (``ui/charts/figures.py``) write plain dictionaries and wrap them with ``figure``,
without plotly's per-property validation: validating a 16-panel grid costs ~0.3 s per rerun, building
the dictionary ~1 ms. tests/test_figures.py validates every builder's output in full instead.
"""

from __future__ import annotations

import base64
import functools

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from _plotly_utils.utils import to_typed_array_spec


@functools.cache
def template(name: str) -> dict:
    """The plotly template ``name`` as a plain dictionary (made once; never changed after: every figure sent
    holds this very object, ``ui/widgets/live.py`` encodes it once)."""
    return pio.templates[name].to_plotly_json()


# plotly sends these keys' values as they are, never as typed arrays (_plotly_utils.utils.is_skipped_key)
_UNCONVERTED_KEYS = frozenset({"geojson", "layer", "layers", "range"})


_FLOAT_CODES = {np.dtype("float32"): "f4", np.dtype("float64"): "f8"}


def typed_array(array: np.ndarray):
    """``array`` in plotly's typed-array form, exactly as ``to_typed_array_spec`` gives it.

    Float arrays (every heatmap's cells) take a direct route: plotly's own first copies the array through
    ``copy_to_readonly_numpy_array`` (~3 ms of Step by step's rerun with ~17 panels, py-spy); base64 of
    the C-ordered bytes is the same. Other dtypes (ints narrowed, strings) go through plotly's function."""
    code = _FLOAT_CODES.get(array.dtype)
    if code is None or array.size == 0:
        return to_typed_array_spec(array)
    spec = {"dtype": code, "bdata": base64.b64encode(np.ascontiguousarray(array)).decode("ascii")}
    if array.ndim > 1:
        spec["shape"] = str(array.shape)[1:-1]
    return spec


def _sendable(value):
    """A copy of the dicts and lists in ``value`` with numpy arrays that are dict values in plotly's typed-array
    form, as ``Figure.to_dict`` makes them (``convert_to_base64``); other leaves are shared, not copied."""
    if isinstance(value, dict):
        return {
            key: typed_array(item) if isinstance(item, np.ndarray) and key not in _UNCONVERTED_KEYS
            else _sendable(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_sendable(item) for item in value]
    return value


class SentFigure(go.Figure):
    """A plotly Figure kept as the plain dictionaries it was built from until it is read as a Figure.

    ``st.plotly_chart`` only calls ``to_dict()``. The ordinary route builds plotly's object tree
    (~1.5 ms for a 4-panel grid, a quarter of it the default template), then deep-copies it back into
    dictionaries on every rerun (~0.8 ms): work the browser never sees. Here ``to_dict`` returns the
    very dictionary plotly would give (the default template added, arrays in plotly's typed-array
    form), made once and kept: a cached figure costs nothing to send again. Reading the figure any
    other way (``fig.data``, ``fig.layout``, ``update_layout``...) builds the ordinary Figure first,
    and from then on it is one, so tests and callers see plotly's own objects.
    Read-only by contract, like every figure the pages show (``ui/run/cached_figures.py``).
    """

    def __init__(self, data: list[dict], layout: dict):  # noqa: D107 - the class docstring says it
        object.__setattr__(self, "_spec", {"data": data, "layout": layout})
        object.__setattr__(self, "_sent", None)
        object.__setattr__(self, "_built", False)

    def _build(self) -> None:
        object.__setattr__(self, "_built", True)
        super().__init__(self._spec, _validate=False)

    def __getattr__(self, name: str):
        # Called only when normal lookup fails: before the build, that is every plotly attribute.
        if name.startswith("__") or object.__getattribute__(self, "_built"):
            raise AttributeError(name)
        self._build()
        return getattr(self, name)

    def __reduce__(self):
        if self._built:
            return go.Figure, (super().to_dict(),)
        return SentFigure, (self._spec["data"], self._spec["layout"])

    def to_dict(self) -> dict:
        if self._built:
            return super().to_dict()
        if self._sent is None:
            object.__setattr__(self, "_sent", self._plotly_dict())
        return self._sent

    def sendable(self) -> dict:
        """What ``to_dict`` returns, made afresh and not kept when it is not kept already.

        For a caller that keeps what it makes of the dictionary instead: the live charts keep the figure's
        JSON (``ui/widgets/live.py``), and the kept dictionary beside it was a third copy of every array in
        the figure caches (issue 38: ~1.6 MB of a 4.6 MB Step by step configuration at the caps)."""
        if self._built or self._sent is not None:
            return self.to_dict()
        return self._plotly_dict()

    def _plotly_dict(self) -> dict:
        sent = _sendable(self._spec)  # numpy arrays -> {"dtype", "bdata", "shape"}, as plotly sends them
        if "template" not in sent["layout"] and pio.templates.default:  # plotly adds the default template
            sent["layout"]["template"] = template(pio.templates.default)
        return sent


def figure(data: list[dict], layout: dict) -> go.Figure:
    """Plain plotly dictionaries as a Figure, without per-property validation (see module docstring)."""
    return SentFigure(data, layout)
