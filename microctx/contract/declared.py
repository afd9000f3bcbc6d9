"""Declared configuration: a TOML file read as a msgspec Struct, with one error style.

`load_declared(path, kind, what)` reads the file (not UTF-8, not TOML or nested too deeply is an
InputError naming the file), then converts the document to the declared type `kind` in one step:
a wrong type, a missing or an unknown key is one InputError naming the file, the key
(`select.floor`, `rule[0].pattern`) and what was expected, the same for every file microctx reads
this way (SWEEP.toml in `microctx.tuning.config`, the redaction map in `microctx.corpus.redact`).
"""

from __future__ import annotations

import os
from typing import Any

from microctx.errors import InputError


def read_toml(path: str | os.PathLike[str]) -> tuple[dict[str, Any], bytes]:
    """A TOML file's document and bytes; not UTF-8, not TOML or nested past reason: an InputError."""
    import tomllib

    from microctx._io.jsonio import read_bytes

    data = read_bytes(path)
    try:
        return tomllib.loads(data.decode("utf-8")), data
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not valid UTF-8: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(path, f"not valid TOML: {exc}") from None
    except RecursionError:
        raise InputError(path, "not valid TOML: nested too deeply") from None


def convert(document: object, kind: type, path: object, what: str) -> Any:
    """`document` as the declared type `kind`, or one InputError naming the file and the key;
    `what` says what the file is ("the sweep file") at the end of the message."""
    import msgspec

    from microctx.contract.records import validation_error

    try:
        return msgspec.convert(document, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise validation_error(path, exc, what) from None
    except RecursionError:
        raise InputError(path, "nested too deeply") from None


def load_declared(path: str | os.PathLike[str], kind: type, what: str) -> tuple[Any, bytes]:
    """(the file as the declared type `kind`, its bytes); see the module's doc for the errors."""
    document, data = read_toml(path)
    return convert(document, kind, path, what), data
