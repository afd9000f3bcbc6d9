"""Errors a user can act on: which file, which record, which field, what was expected."""

from __future__ import annotations


class InputError(Exception):
    """Unusable input. The CLI prints it as one line and exits 2.

    `file` is the path as the user gave it; `record` names the record (an index, an id or a
    number, whatever identifies it best); `field` is the JSON key at fault.
    """

    def __init__(self, file: object, message: str, *, record: object = None, field: str | None = None):
        self.file = str(file)
        self.message = message
        self.record = record
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = [self.file]
        if self.record is not None:
            where.append(f"record {self.record}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        return f"{': '.join(where)}: {self.message}"


def json_type_name(value: object) -> str:
    """The JSON name of a parsed value's type, for messages ("expected a string, got null")."""
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number",
            float: "number", type(None): "null"}.get(type(value), type(value).__name__)


class ContractError(Exception):
    """The artifacts would break the contract (for example a leak check fails); nothing is written."""
