"""Errors a user can act on: which file, which record, which field, what was expected."""

from __future__ import annotations

import re


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
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


class ContractError(Exception):
    """The artifacts would break the contract (for example a leak check fails); nothing is written."""


# --- URLs in messages: never with a secret in them ----------------------------------------------

_SECRET_PARAM = re.compile(r"(?i)(token|secret|password|passwd|signature|sig|key|auth|code|credential|session)")
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def scrub_url(url: str) -> str:
    """`url` fit to be shown: user and password (`https://user:pass@host`) and the values of query
    parameters that look like secrets (`access_token=`, `sig=`, `client_secret=`, ...) hidden."""
    from urllib.parse import parse_qsl, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "[a URL that cannot be parsed]"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "[hidden]@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = "&".join(
            f"{k}=[hidden]" if _SECRET_PARAM.search(k) else (f"{k}={v}" if v or "=" in query else k) for k, v in pairs
        )
    fragment = "[hidden]" if parts.fragment and _SECRET_PARAM.search(parts.fragment) else parts.fragment
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def scrub_urls(text: str) -> str:
    """`text` with every URL in it passed through `scrub_url`."""
    return _URL.sub(lambda m: scrub_url(m.group(0)), text)


# --- secrets in messages: hidden by value, in every form they can come back in -------------------

SECRET_SHOWN_AS = "[token hidden]"


_NAMED = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"}  # HTML's named references


def _escaped_char(char: str) -> str:
    """A regex for one character as itself or escaped: percent-encoded, a JSON or Python `\\uXXXX`
    / `\\xXX` escape (and JSON's `\\/`), an HTML character reference (escapes in either case)."""
    code = ord(char)
    forms = [f"%{code:02x}", f"\\\\u{code:04x}", f"\\\\x{code:02x}", f"&#0*{code};", f"&#x0*{code:x};"]
    forms += ["\\\\/"] if char == "/" else []
    forms += [_NAMED[char]] if char in _NAMED else []
    return "(?:(?i:" + "|".join(forms) + ")|" + re.escape(char) + ")"


def secret_pattern(value: str, *, exact_case: bool = False) -> re.Pattern[str]:
    """A pattern matching `value` in any mix of its raw and escaped forms (escapes in any case;
    the raw characters case-insensitively unless `exact_case`: an over-match hides a little
    more, never less)."""
    return re.compile("".join(_escaped_char(c) for c in value), 0 if exact_case else re.IGNORECASE)


def scrub_secret(text: str, pattern: re.Pattern[str] | None) -> str:
    """`text` with every form of the secret `pattern` matches hidden. Call it before a message is
    cut or has its whitespace folded: a cut secret no longer matches."""
    return pattern.sub(SECRET_SHOWN_AS, text) if pattern is not None else text


def shown(text: str, limit: int, pattern: re.Pattern[str] | None = None) -> str:
    """`text` fit for one line of a message: secrets scrubbed by value, URLs scrubbed, whitespace
    folded, then cut to `limit` characters (in that order, so a cut never shows part of a secret).
    Secrets are scrubbed again after the URLs: showing a URL decodes its query once."""
    return " ".join(scrub_secret(scrub_urls(scrub_secret(text, pattern)), pattern).split())[:limit]


# --- the secrets in this process's environment: never echoed back in a message ------------------

_SECRET_VARIABLE = re.compile(r"(?i)(token|secret|passw|api_?key|access_?key|private_?key|credential)")
_MIN_SECRET = 8  # a shorter value ("1", "true") is no secret, and hiding it would hide ordinary text


def environment_secrets() -> dict[str, str]:
    """Value -> name of the environment variables named like secrets (GITHUB_TOKEN,
    OPENAI_API_KEY, MICROCTX_TOKEN, AWS_SECRET_ACCESS_KEY...) whose values have at least 8
    characters, longest value first."""
    import os

    found = {v: k for k, v in sorted(os.environ.items()) if _SECRET_VARIABLE.search(k) and len(v) >= _MIN_SECRET}
    return dict(sorted(found.items(), key=lambda item: len(item[0]), reverse=True))


def environment_secret_in(value: object) -> str | None:
    """The name of the first environment secret (`environment_secrets`) whose value a string in
    `value` (a string, or the keys and items of dicts and lists, nested) holds, or None."""

    def strings(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [s for k, v in node.items() for s in strings(k) + strings(v)]
        if isinstance(node, (list, tuple)):
            return [s for item in node for s in strings(item)]
        return []

    text = "\n".join(strings(value))
    return next((name for secret, name in environment_secrets().items() if secret in text), None)


def scrub_message(text: str) -> str:
    """`text` fit to print: every secret of the environment hidden by value (raw or escaped, see
    `secret_pattern`), then URLs scrubbed (`scrub_urls`). A user who gives a key where its
    variable's name belongs (`--model-key-env sk-...`) is told so without the key shown."""
    for value in environment_secrets():
        text = scrub_secret(text, secret_pattern(value, exact_case=True))
    return scrub_urls(text)
