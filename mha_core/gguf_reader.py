"""A GGUF file (llama.cpp's format) read in NumPy, and its quantized matrices kept quantized.

A GGUF file is a header of typed key/value settings (the architecture's numbers, the vocabulary,
the merges), a table of tensors (name, shape, type, offset) and, aligned after it, the tensors'
bytes. This reader keeps the settings as Python values and reads each tensor's bytes into one
array of its own; nothing stays memory-mapped.

Why not ``gguf.GGUFReader``: it holds every string of the vocabulary as small NumPy arrays, which
took 2.3 s and 167 MB of memory for this 98 MB file on this machine (this reader: 0.2 s, 10 MB).
The tests check this reader against it, setting by setting and byte by byte.

Quantized types are records (``QUANT_TYPES``): a block of ``block_size`` numbers is stored in
``block_bytes`` bytes; its ``unpack`` gives the stored integers, the block's scale and offset, and
``dequantize_blocks`` does the same float32 arithmetic as ``gguf.quants`` (bit for bit: a test
compares them). ``PackedMatrix`` is a tensor as the file holds it, ``QuantizedMatrix`` one
unpacked once at load (a byte per integer, transposed for row-convention products):

    Q8_0  block of 32: d (float16), then 32 int8 q       w = q * d
    Q4_1  block of 32: d, m (float16), then 16 bytes     w = d * q + m, q = low nibble of byte j
                                                          for number j, high nibble for number j + 16
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32


class GGUFFormatError(ValueError):
    """The bytes do not follow the GGUF layout (or use a type this reader does not know)."""


# ---- the quantized types, one record each ----


def _halves(blocks: np.ndarray, start: int) -> np.ndarray:
    """One float16 per block at byte ``start``, as float32: (rows, nb, block_bytes) -> (rows, nb)."""
    return np.ascontiguousarray(blocks[..., start : start + 2]).view(np.float16)[..., 0].astype(np.float32)  # (rows, nb)


def unpack_q8_0(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, None]:
    """(rows, nb, 34) bytes -> q (rows, nb, 32) int8, d (rows, nb) float32; w = q * d."""
    return blocks[..., 2:34].view(np.int8), _halves(blocks, 0), None  # (rows, nb, 32), (rows, nb)


def unpack_q4_1(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, nb, 20) bytes -> q (rows, nb, 32) uint8 in 0..15, d, m (rows, nb) float32; w = d * q + m.

    Number j of a block is the low nibble of its byte j, number j + 16 the high nibble.
    """
    packed = blocks[..., 4:20]  # (rows, nb, 16)
    q = np.concatenate([packed & 0x0F, packed >> 4], axis=-1)  # (rows, nb, 32)
    return q, _halves(blocks, 0), _halves(blocks, 2)


def unpack_f32(blocks: np.ndarray) -> tuple[np.ndarray, None, None]:
    """(rows, n, 4) bytes -> the float32 numbers (rows, n, 1) as they are."""
    return np.ascontiguousarray(blocks).view(np.float32), None, None  # (rows, n, 1)


@dataclass(frozen=True)
class QuantType:
    """One ggml tensor type: ``block_size`` numbers stored in ``block_bytes`` bytes.

    ``unpack``: (rows, nb, block_bytes) uint8 -> the stored integers (rows, nb, block_size), each
    block's scale (rows, nb) float32 or None, each block's offset (rows, nb) float32 or None.
    """

    name: str
    block_size: int
    block_bytes: int
    unpack: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray | None, np.ndarray | None]]

    @property
    def bits_per_number(self) -> float:
        return 8 * self.block_bytes / self.block_size


QUANT_TYPES: dict[int, QuantType] = {  # ggml's type ids (ggml.h)
    0: QuantType("F32", 1, 4, unpack_f32),
    3: QuantType("Q4_1", 32, 20, unpack_q4_1),
    8: QuantType("Q8_0", 32, 34, unpack_q8_0),
}


def dequantize_blocks(numbers: np.ndarray, scale: np.ndarray | None, offset: np.ndarray | None) -> np.ndarray:
    """w = q * d (+ m) in float32, gguf.quants' arithmetic: (..., nb, 32) with (..., nb) scales -> (..., nb, 32)."""
    w = numbers.astype(np.float32)  # (..., nb, 32)
    if scale is not None:
        w *= scale[..., None]
    if offset is not None:
        w += offset[..., None]
    return w


@dataclass(frozen=True, eq=False)
class PackedMatrix:
    """A (rows, cols) matrix as the file stores it: each row is cols / block_size packed blocks.

    ``blocks (rows, nb * block_bytes)`` uint8, read-only. Rows are torch's output features (a
    Linear's W is (out, in)), blocks run along the input features.
    """

    kind: QuantType
    rows: int
    cols: int
    blocks: np.ndarray

    def __post_init__(self) -> None:
        self.blocks.flags.writeable = False

    def unpack(self) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """The integers (rows, nb, block_size), scales and offsets (rows, nb) of every block."""
        grouped = self.blocks.reshape(self.rows, -1, self.kind.block_bytes)  # (rows, nb, block_bytes)
        return self.kind.unpack(grouped)

    def dequantize(self) -> np.ndarray:
        """The float32 numbers, (rows, cols)."""
        return dequantize_blocks(*self.unpack()).reshape(self.rows, self.cols)  # (rows, cols)


@dataclass(frozen=True, eq=False)
class QuantizedMatrix:
    """A quantized matrix W (out, in) kept as its integers, transposed for row-convention products.

    ``numbers (nb, block_size, out)``: the stored integers of W^T (input feature b*32 + j, output
    o), one byte each (uint8 for Q4_1's 0..15, int8 for Q8_0); ``scale``, ``offset (nb, 1, out)``
    float32 (offset None for Q8_0). ``transposed()`` = W^T (in, out) float32, the numbers of the
    file's dequantization exactly; 4-bit numbers take a byte here instead of half of one (speed:
    a layer dequantizes ~4x faster than from the packed nibbles, bench/bench_smollm2.py).
    """

    kind: QuantType
    numbers: np.ndarray
    scale: np.ndarray
    offset: np.ndarray | None

    def __post_init__(self) -> None:
        for array in (self.numbers, self.scale, self.offset):
            if array is not None:
                array.flags.writeable = False

    @classmethod
    def from_packed(cls, packed: PackedMatrix, row_order: np.ndarray | None = None) -> QuantizedMatrix:
        """Unpack once; ``row_order`` reorders W's rows (output features; never crosses a block)."""
        numbers, scale, offset = packed.unpack()  # (out, nb, 32), (out, nb), (out, nb)
        if row_order is not None:
            numbers, scale = numbers[row_order], scale[row_order]
            offset = None if offset is None else offset[row_order]

        def by_block(a):
            return None if a is None else np.ascontiguousarray(a.transpose(1, 2, 0) if a.ndim == 3 else a.T[:, None, :])

        return cls(packed.kind, by_block(numbers), by_block(scale), by_block(offset))  # (nb, 32, out), (nb, 1, out)

    @property
    def shape(self) -> tuple[int, int]:
        """W's (out, in)."""
        return self.numbers.shape[2], self.numbers.shape[0] * self.numbers.shape[1]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.numbers, self.scale, self.offset) if a is not None)

    def transposed(self, columns: slice | np.ndarray | None = None) -> np.ndarray:
        """W^T in float32, (in, out); ``columns`` picks some output features (rows of W) only."""
        pick = slice(None) if columns is None else columns
        w = self.numbers[..., pick].astype(np.float32)  # (nb, 32, out')
        w *= self.scale[..., pick]
        if self.offset is not None:
            w += self.offset[..., pick]
        return w.reshape(-1, w.shape[-1])  # (in, out')


# ---- the file ----


@dataclass(frozen=True)
class TensorInfo:
    """One entry of the tensor table: ggml's shape (fastest-varying first), type id, offset in the data."""

    name: str
    shape: tuple[int, ...]
    type_id: int
    offset: int

    @property
    def kind(self) -> QuantType:
        if self.type_id not in QUANT_TYPES:
            raise GGUFFormatError(f"tensor {self.name} has ggml type {self.type_id}; this reader knows "
                                  f"{', '.join(f'{t.name} ({i})' for i, t in QUANT_TYPES.items())}")
        return QUANT_TYPES[self.type_id]

    @property
    def n_numbers(self) -> int:
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.n_numbers // self.kind.block_size * self.kind.block_bytes


_SCALARS = {  # GGUF value type -> struct format
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d",
}
_STRING, _ARRAY = 8, 9


class _Cursor:
    """Reads little-endian GGUF values from a binary file, in order."""

    def __init__(self, file) -> None:
        self.file = file

    def take(self, n: int) -> bytes:
        data = self.file.read(n)
        if len(data) != n:
            raise GGUFFormatError("the file ends inside its header")
        return data

    def scalar(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return self.take(self.scalar("<Q")).decode("utf-8")

    def value(self, type_id: int):
        if type_id in _SCALARS:
            return self.scalar(_SCALARS[type_id])
        if type_id == _STRING:
            return self.string()
        if type_id == _ARRAY:
            item_type, count = self.scalar("<I"), self.scalar("<Q")
            if item_type in _SCALARS:  # one read for the whole array
                fmt = _SCALARS[item_type]
                return list(struct.unpack(f"<{count}{fmt[1]}", self.take(count * struct.calcsize(fmt))))
            return [self.value(item_type) for _ in range(count)]
        raise GGUFFormatError(f"unknown GGUF value type {type_id}")


@dataclass(frozen=True)
class GGUFContents:
    """The settings, the tensor table, and where the tensors' bytes start in the file."""

    path: Path
    version: int
    metadata: dict
    tensors: dict[str, TensorInfo]
    data_start: int

    def read_tensor(self, name: str) -> PackedMatrix:
        """One tensor's bytes, read from the file into an array of its own, as a (rows, cols) matrix.

        ggml's shape is (cols, rows) for a matrix, (n,) for a vector (one row).
        """
        info = self.tensors[name]
        cols, rows = (info.shape + (1,))[:2]
        data = np.empty(info.nbytes, dtype=np.uint8)  # (bytes,)
        with open(self.path, "rb") as file:
            file.seek(self.data_start + info.offset)
            if file.readinto(memoryview(data)) != info.nbytes:
                raise GGUFFormatError(f"the file ends inside tensor {name}")
        return PackedMatrix(info.kind, rows, cols, data.reshape(rows, -1))  # (rows, row bytes)

    def read_vector(self, name: str) -> np.ndarray:
        """A float32 tensor (a norm's gain) as a read-only array of its numbers."""
        matrix = self.read_tensor(name)
        vector = matrix.dequantize().reshape(-1)  # (n,)
        vector.flags.writeable = False
        return vector


def read_gguf(path: str | Path) -> GGUFContents:
    """Read a GGUF file's settings and tensor table (not the tensors: ``read_tensor`` reads one)."""
    path = Path(path)
    with open(path, "rb") as file:
        cursor = _Cursor(file)
        if cursor.take(4) != GGUF_MAGIC:
            raise GGUFFormatError(f"{path} does not start with GGUF's magic bytes: it is no GGUF file")
        version = cursor.scalar("<I")
        if version not in (2, 3):
            raise GGUFFormatError(f"{path} is GGUF version {version}; this reader knows versions 2 and 3")
        n_tensors, n_settings = cursor.scalar("<Q"), cursor.scalar("<Q")
        metadata = {}
        for _ in range(n_settings):
            key = cursor.string()
            metadata[key] = cursor.value(cursor.scalar("<I"))
        tensors = {}
        for _ in range(n_tensors):
            name = cursor.string()
            shape = tuple(cursor.scalar("<Q") for _ in range(cursor.scalar("<I")))
            tensors[name] = TensorInfo(name, shape, cursor.scalar("<I"), cursor.scalar("<Q"))
        alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        data_start = -(-file.tell() // alignment) * alignment  # the next multiple of the alignment
    return GGUFContents(path, version, metadata, tensors, data_start)
