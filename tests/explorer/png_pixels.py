"""A minimal PNG reader (8-bit RGB/RGBA, non-interlaced: what Chromium writes) for pixel checks
without an imaging dependency. Unfiltering runs along anti-diagonals, which depend only on the
two before them, so each step is one numpy operation."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np


def read_png(path: Path) -> np.ndarray:
    """The image as an (height, width, channels) uint8 array."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and interlace == 0 and color in (2, 6), (depth, color, interlace)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    rows = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, -1)
    kinds = rows[:, 0].astype(np.int64)
    filtered = rows[:, 1:].reshape(height, width, channels).astype(np.int64)
    out = np.zeros((height + 1, width + 1, channels), dtype=np.int64)  # zero row/col padding
    for d in range(height + width - 1):
        ys = np.arange(max(0, d - width + 1), min(height, d + 1))
        xs = d - ys
        left, up, ul = out[ys + 1, xs], out[ys, xs + 1], out[ys, xs]
        p = left + up - ul
        pa, pb, pc = np.abs(p - left), np.abs(p - up), np.abs(p - ul)
        paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, ul))
        k = kinds[ys][:, None]
        pred = np.select([k == 1, k == 2, k == 3, k == 4],
                         [left, up, (left + up) // 2, paeth], 0)
        out[ys + 1, xs + 1] = (filtered[ys, xs] + pred) & 0xFF
    return out[1:, 1:].astype(np.uint8)
