"""The command-line number types every command shares, one home for their ranges: whole numbers
within bounds (`--seed`, `--n-boot`, counts) and seconds (timeouts). An argparse `type=`; a value
out of range is a usage error (one line, exit 2) before anything runs. Here, at the base, so that
`microctx study` (registered from `semantic/`) checks its options as every other command does."""

from __future__ import annotations

import argparse
import math

MAX_SECONDS = 30 * 86400  # a timeout past 30 days is a typo (1e308 would silently disable it)


def seconds(text: str) -> float:
    """A positive, finite number of seconds, at most 30 days (`inf`, `nan`, 0, negatives and
    `1e308` are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0 or value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"expected a positive, finite number of seconds, at most {MAX_SECONDS} (30 days), got {text!r}"
        )
    return value


def bounded_int(low: int, high: int):
    """An argparse type: a whole number from `low` to `high` (a seed of -1, 2e9 resamples and the
    like are refused as one line, exit 2, before anything runs)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}, got {text!r}")
        return value

    parse.__name__ = "whole number"
    return parse


SEED = bounded_int(0, 2**32 - 1)  # numpy's seed range
N_BOOT = bounded_int(1, 1_000_000)  # 10^6 resamples of a few thousand components fit in memory
POSITIVE = bounded_int(1, 10**9)
