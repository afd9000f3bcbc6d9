"""RFC 3339 timestamps as the published tool reads and writes them.

A timestamp keeps its own UTC offset and its fraction to the nanosecond (Python's datetime
stops at microseconds), so it is held as its canonical text plus its instant in nanoseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Every instant must be a UTC date Python can write (`utc_second`): years 1 to 9999 in UTC, whatever
# the local offset says (9999-12-31T23:59:59-23:59 is in the year 10000 in UTC and is refused).
_MIN_NS = int((datetime(1, 1, 1, tzinfo=UTC) - _EPOCH).total_seconds()) * 1_000_000_000
_MAX_NS = int((datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) - _EPOCH).total_seconds()) * 1_000_000_000 + 999_999_999


@dataclass(frozen=True, slots=True)
class Timestamp:
    text: str  # canonical RFC 3339: own offset (zero written Z), fraction without trailing zeros
    instant_ns: int  # nanoseconds since the Unix epoch, for ordering by instant


_UTC_SECONDS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", re.ASCII)


def parse_timestamp(text: str) -> Timestamp:
    """Parse RFC 3339; raise ValueError with a short reason when it is not."""
    if len(text) == 20 and _UTC_SECONDS.fullmatch(text):
        # The common case (GitHub writes UTC to the second): already canonical.
        try:
            moment = datetime.fromisoformat(text)
        except ValueError as exc:
            raise ValueError(f"{exc}: {text!r}") from None
        return Timestamp(text, int(moment.timestamp()) * 1_000_000_000)
    m = _RFC3339.fullmatch(text)
    if m is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    fraction = m.group(7) or ""
    offset_min = 0
    if m.group(9):
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:
            raise ValueError(f"UTC offset out of range: {text!r}")
        offset_min = (oh * 60 + om) * (-1 if m.group(9) == "-" else 1)
    try:
        local = datetime(year, month, day, hour, minute, second, tzinfo=timezone(timedelta(minutes=offset_min)))
    except ValueError as exc:
        raise ValueError(f"{exc}: {text!r}") from None
    delta = local - _EPOCH
    nanos = int(fraction.ljust(9, "0")) if fraction else 0
    instant = (delta.days * 86400 + delta.seconds) * 1_000_000_000 + nanos
    if not _MIN_NS <= instant <= _MAX_NS:
        raise ValueError(f"instant out of range (UTC years 1 to 9999): {text!r}")
    canonical = f"{m.group(1)}-{m.group(2)}-{m.group(3)}T{m.group(4)}:{m.group(5)}:{m.group(6)}"
    fraction = fraction.rstrip("0")
    if fraction:
        canonical += "." + fraction
    if offset_min == 0:
        canonical += "Z"
    else:
        sign = "-" if offset_min < 0 else "+"
        canonical += f"{sign}{abs(offset_min) // 60:02d}:{abs(offset_min) % 60:02d}"
    return Timestamp(canonical, instant)


def is_timestamp(text: str) -> bool:
    """Whether `parse_timestamp` takes `text`, checked without building its value in the common
    case (UTC to the second: about 0.3 us against 1.5 us)."""
    try:
        if len(text) == 20 and _UTC_SECONDS.fullmatch(text):
            datetime.fromisoformat(text)
        else:
            parse_timestamp(text)
    except ValueError:
        return False
    return True


def utc_second(instant_ns: int) -> str:
    """The instant in UTC, truncated to the second, as RFC 3339 (how `frozen_at` is written)."""
    moment = _EPOCH + timedelta(seconds=instant_ns // 1_000_000_000)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
