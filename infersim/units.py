"""Unit constants and the one place quantities are written for people.

Engines work in cycles and bytes; seconds and SI prefixes appear only at the boundary. Every
table of the CLI, every human-readable companion of a JSON document and every cell and hover
text of a report formats its figures here, so they agree: plain decimal notation (never
``6.422e+04``), three significant figures by default while every integer digit is kept
(``64,223`` tokens/s, ``0.00121``), thousands separators, and the unit a reader expects (ms,
µs, tok/s, mm², W, $). A missing or non-finite figure is written ``–`` (or ``∞``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 1024
MiB = 1024**2
GiB = 1024**3

NS = 1e-9
US = 1e-6
MS = 1e-3

MISSING = "–"
"""How a missing (None or NaN) figure is written."""

_SI = [(1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"),
       (1e3, "k")]
_SI_SMALL = [(1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"), (1e-12, "p"), (1e-15, "f")]


def _missing(value: float | None) -> str | None:
    """The text of a figure that is not a finite number, or None when it is one."""
    if value is None or math.isnan(value):
        return MISSING
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return None


def significant(value: float | None, digits: int = 3, grouping: bool = True,
                trim: bool = False) -> str:
    """``value`` in plain decimal notation with ``digits`` significant figures, every integer
    digit kept, trailing zeros kept (columns align; ``trim`` drops them, for parameters a
    person typed) and thousands separators: ``significant(64223.4) == "64,223"``,
    ``significant(0.0012134) == "0.00121"``, ``significant(41.0) == "41.0"``,
    ``significant(0.8, trim=True) == "0.8"``. Never scientific notation; ``–`` for None or
    NaN."""
    if (text := _missing(value)) is not None:
        return text
    assert value is not None
    if value == 0:
        return "0"
    sep = "," if grouping else ""
    exponent = math.floor(math.log10(abs(value)))
    decimals = max(digits - 1 - exponent, 0)
    text = f"{value:{sep}.{decimals}f}"
    rounded = abs(float(text.replace(",", "")))
    if decimals and rounded and math.floor(math.log10(rounded)) > exponent:
        text = f"{value:{sep}.{decimals - 1}f}"  # 9.996 rounds to 10.0, not 10.00
    if trim and "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if float(text.replace(",", "")) == 0 else text


def fmt_bytes_binary(n_bytes: float | None) -> str:
    """Binary bytes, for capacities built in powers of two: ``fmt_bytes_binary(4 * 2**20) ==
    "4 MiB"``."""
    if (text := _missing(n_bytes)) is not None:
        return f"{text} B"
    assert n_bytes is not None
    for scale, prefix in ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if abs(n_bytes) >= scale:
            return f"{significant(n_bytes / scale, trim=True)} {prefix}B"
    return f"{significant(n_bytes, trim=True)} B"


def si(value: float | None, unit: str, digits: int = 3, small: bool = False) -> str:
    """``value`` with an SI prefix: ``si(3.35e12, "B/s") == "3.35 TB/s"``; with ``small``,
    also the prefixes below one (``si(2.5e-6, "J", small=True) == "2.50 µJ"``)."""
    if (text := _missing(value)) is not None:
        return f"{text} {unit}".rstrip()
    assert value is not None
    magnitude = abs(value)
    scales = _SI + (_SI_SMALL if small else [])
    for scale, prefix in scales:
        if magnitude >= scale:
            return f"{significant(value / scale, digits)} {prefix}{unit}".rstrip()
    if small and magnitude:
        scale, prefix = _SI_SMALL[-1]
        return f"{significant(value / scale, digits)} {prefix}{unit}".rstrip()
    return f"{significant(value, digits)} {unit}".rstrip()


def fmt_bytes(n_bytes: float | None) -> str:
    """Decimal bytes: ``fmt_bytes(138e9) == "138 GB"``."""
    return si(n_bytes, "B")


def fmt_time(seconds: float | None) -> str:
    """Seconds with the most readable unit (s, ms, µs, ns): ``fmt_time(0.0411) == "41.1 ms"``."""
    if (text := _missing(seconds)) is not None:
        return text
    assert seconds is not None
    magnitude = abs(seconds)
    if magnitude >= 1 or magnitude == 0:
        return f"{significant(seconds)} s"
    if magnitude >= MS:
        return f"{significant(seconds / MS)} ms"
    if magnitude >= US:
        return f"{significant(seconds / US)} µs"
    return f"{significant(seconds / NS)} ns"


def fmt_rate(value: float | None, unit: str = "tok/s") -> str:
    """A rate: ``fmt_rate(64223.4) == "64,223 tok/s"``."""
    return f"{significant(value)} {unit}"


def fmt_area(mm2: float | None) -> str:
    """Die area (trailing zeros dropped): ``fmt_area(814) == "814 mm²"``,
    ``fmt_area(16.0) == "16 mm²"``."""
    return f"{significant(mm2, trim=True)} mm²"


def fmt_power(watts: float | None) -> str:
    """Power in W (mW below one watt; trailing zeros dropped): ``fmt_power(75.0) == "75 W"``,
    ``fmt_power(0.278) == "278 mW"``."""
    if watts is not None and not math.isnan(watts) and 0 < abs(watts) < 1:
        return f"{significant(watts * 1e3, trim=True)} mW"
    return f"{significant(watts, trim=True)} W"


def fmt_usd(dollars: float | None) -> str:
    """US dollars (trailing zeros dropped): ``fmt_usd(28000) == "$28,000"``,
    ``fmt_usd(1201.4) == "$1,201"``, ``fmt_usd(0.5) == "$0.5"``."""
    text = significant(dollars, trim=True)
    if text.startswith("-"):
        return "-$" + text[1:]
    return text if text in (MISSING, "∞") else "$" + text


def fmt_energy(joules: float | None, unit: str = "J") -> str:
    """Energy with a prefix: ``fmt_energy(2.53e-3) == "2.53 mJ"``; ``unit`` may carry a
    denominator (``"J/token"``)."""
    return si(joules, unit, small=True)


def fmt_percent(fraction: float | None, digits: int = 0) -> str:
    """A fraction as a percentage: ``fmt_percent(0.934) == "93%"``."""
    if (text := _missing(fraction)) is not None:
        return text
    assert fraction is not None
    return f"{fraction * 100:.{digits}f}%"


def fmt_count(n: float | None) -> str:
    """A count with thousands separators: ``fmt_count(11460) == "11,460"``."""
    if (text := _missing(n)) is not None:
        return text
    assert n is not None
    return f"{round(n):,}"


UNIT_FORMATS: dict[str, Callable[[float | None], str]] = {
    "s": fmt_time,
    "B": fmt_bytes,
    "B/s": lambda v: si(v, "B/s"),
    "FLOP": lambda v: si(v, "FLOP"),
    "FLOP/s": lambda v: si(v, "FLOP/s"),
    "Hz": lambda v: si(v, "Hz"),
    "tokens/s": fmt_rate,
    "inferences/s": lambda v: fmt_rate(v, "inf/s"),
    "tokens/s/mm²": lambda v: fmt_rate(v, "tok/s/mm²"),
    "tokens/s/W": lambda v: fmt_rate(v, "tok/s/W"),
    "tokens/s/$": lambda v: fmt_rate(v, "tok/s/$"),
    "points/min": lambda v: fmt_rate(v, "points/min"),
    "mm²": fmt_area,
    "W": fmt_power,
    "$": fmt_usd,
    "J": fmt_energy,
    "J/token": lambda v: fmt_energy(v, "J/token"),
    "chips": fmt_count,
    "": significant,
}
"""Unit (as metric tables write it) → the function that writes a figure in it."""


def fmt_quantity(value: float | None, unit: str) -> str:
    """``value`` written in ``unit`` (one of :data:`UNIT_FORMATS`, else three significant
    figures and the unit): ``fmt_quantity(0.0411, "s") == "41.1 ms"``."""
    writer = UNIT_FORMATS.get(unit)
    if writer is not None:
        return writer(value)
    return f"{significant(value)} {unit}".rstrip()
