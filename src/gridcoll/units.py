"""Human units at the edges: sizes, times and bandwidths.

Inside gridcoll every quantity is in bytes and seconds. These helpers parse and print
the units a person types and reads.

Conventions (documented in ``docs/grid-format.md``):

* sizes use binary prefixes whether or not the ``i`` is written, as MPI users and the
  papers do ("64KB" is 65536 bytes, "1MB" and "1MiB" are 1048576 bytes);
* bandwidths use decimal prefixes, as networks do ("1MB/s" is 10**6 bytes/s, "100Mb/s"
  and "100Mbps" are 10**8 bits/s).
"""

import re

from gridcoll.errors import ParameterError

__all__ = ["format_size", "format_time", "parse_bandwidth", "parse_size", "parse_time"]

_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "": 1.0}
_RATE_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_NUMBER = r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*"


def parse_size(text: str | int) -> int:
    """Parse a byte count: ``1048576``, ``64KB``, ``64KiB``, ``1MiB``, ``2 GB``.

    Raises :class:`ParameterError` naming the text if it is not a non-negative size.
    """
    if isinstance(text, int):
        if text < 0:
            raise ParameterError(f"size must be non-negative, got {text!r}")
        return text
    match = re.fullmatch(_NUMBER + r"([kKmMgGtT]?)(i?)([bB]?)\s*", str(text))
    if not match:
        raise ParameterError(f"cannot parse size {text!r}; use e.g. 1048576, 64KB or 1MiB")
    number, prefix, _, _ = match.groups()
    value = float(number) * _SIZE_UNITS[prefix.lower()]
    if value != int(value):
        raise ParameterError(f"size {text!r} is not a whole number of bytes")
    return int(value)


def parse_time(text: str | float) -> float:
    """Parse a duration: ``10ms``, ``20us``, ``1.5s``, ``0.01`` (seconds)."""
    if isinstance(text, int | float):
        return float(text)
    match = re.fullmatch(_NUMBER + r"(s|ms|us|µs|ns|)\s*", str(text))
    if not match:
        raise ParameterError(f"cannot parse time {text!r}; use e.g. 10ms, 20us or 1.5s")
    return float(match.group(1)) * _TIME_UNITS[match.group(2)]


def parse_bandwidth(text: str | float) -> float:
    """Parse a bandwidth into bytes per second: ``1MB/s``, ``100Mb/s``, ``100Mbps``."""
    if isinstance(text, int | float):
        return float(text)
    match = re.fullmatch(_NUMBER + r"([kKmMgGtT]?)(B|b)(?:/s|ps)\s*", str(text))
    if not match:
        raise ParameterError(f"cannot parse bandwidth {text!r}; use e.g. 1MB/s or 100Mbps")
    number, prefix, unit = match.groups()
    value = float(number) * _RATE_PREFIX[prefix.lower()]
    return value if unit == "B" else value / 8.0


def format_size(nbytes: float) -> str:
    """Print a byte count with a binary prefix: ``1 MiB``, ``64 KiB``, ``17 B``."""
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if nbytes >= factor:
            value = nbytes / factor
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.2f} {unit}"
    return f"{int(nbytes)} B"


def format_time(seconds: float) -> str:
    """Print a duration with a sensible unit: ``1.079 s``, ``12.3 ms``, ``45.0 us``."""
    if seconds >= 1.0:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.1f} us"
