"""Human units at the edges: gridcoll.units."""

import pytest

from gridcoll.errors import GridcollError, ParameterError
from gridcoll.units import format_size, format_time, parse_bandwidth, parse_size, parse_time


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1048576", 1048576),
        ("0", 0),
        ("17", 17),
        ("17B", 17),
        ("64KB", 65536),
        ("64KiB", 65536),
        ("64k", 65536),
        ("1MiB", 2**20),
        ("1MB", 2**20),
        ("1mb", 2**20),
        ("2 GB", 2 * 2**30),
        ("1TiB", 2**40),
        ("0.5MiB", 2**19),
        ("1.5KiB", 1536),
        ("1e3", 1000),
        (" 8 KiB ", 8192),
        (4096, 4096),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "KiB", "1XB", "one MiB", "-1", "-1KiB", "1 MiBs", "1..5K"])
def test_parse_size_rejects_garbage_naming_the_text(text):
    with pytest.raises(ParameterError) as info:
        parse_size(text)
    assert repr(text) in str(info.value)


def test_parse_size_rejects_fractional_bytes_and_negative_ints():
    with pytest.raises(ParameterError, match="whole number of bytes"):
        parse_size("1.5")
    with pytest.raises(ParameterError, match="non-negative"):
        parse_size(-3)


def test_parameter_error_is_a_gridcoll_error_and_a_value_error():
    with pytest.raises(GridcollError):
        parse_size("nope")
    with pytest.raises(ValueError):
        parse_size("nope")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10ms", 10e-3),
        ("20us", 20e-6),
        ("20µs", 20e-6),
        ("5ns", 5e-9),
        ("1.5s", 1.5),
        ("0.01", 0.01),
        (" 3 ms ", 3e-3),
        (0.25, 0.25),
        (2, 2.0),
    ],
)
def test_parse_time(text, expected):
    assert parse_time(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "ms", "10 min", "ten ms", "-1ms"])
def test_parse_time_rejects_garbage(text):
    with pytest.raises(ParameterError, match="cannot parse time"):
        parse_time(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1MB/s", 1e6),  # decimal prefixes for rates, as networks use them
        ("50MB/s", 50e6),
        ("100Mb/s", 100e6 / 8),
        ("100Mbps", 100e6 / 8),
        ("1GB/s", 1e9),
        ("10Kbps", 10e3 / 8),
        ("64 B/s", 64.0),
        (1e6, 1e6),
    ],
)
def test_parse_bandwidth(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "1MB", "fast", "1 MB/h", "Mb/s"])
def test_parse_bandwidth_rejects_garbage(text):
    with pytest.raises(ParameterError, match="cannot parse bandwidth"):
        parse_bandwidth(text)


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (0, "0 B"),
        (17, "17 B"),
        (1024, "1 KiB"),
        (1536, "1.50 KiB"),
        (65536, "64 KiB"),
        (2**20, "1 MiB"),
        (3 * 2**30, "3 GiB"),
    ],
)
def test_format_size(nbytes, text):
    assert format_size(nbytes) == text


@pytest.mark.parametrize("nbytes", [1, 1000, 1024, 65536, 2**20, 16 * 2**20, 2**30])
def test_format_then_parse_size_round_trips_powers(nbytes):
    if nbytes & (nbytes - 1) == 0:  # exact for powers of two
        assert parse_size(format_size(nbytes).replace(" ", "")) == nbytes


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(1.0794, "1.079 s"), (7.425, "7.425 s"), (12.34e-3, "12.3 ms"), (45e-6, "45.0 us")],
)
def test_format_time(seconds, text):
    assert format_time(seconds) == text
