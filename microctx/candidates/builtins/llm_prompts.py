"""llm's prompts, the packing of records into them, and the strict checking of the answers (see microctx.candidates.builtins.llm)."""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import dataclass
from importlib import resources

import orjson

from microctx.candidates.builtins.llm_config import CHARS_PER_TOKEN, OUTPUT_TOKENS_PER_RECORD, PROMPTS, Config
from microctx.contract.patterns import CUE_WORDS

_SHAPES = {
    "state": '"OPEN" | "CLOSED"',
    "labels": "[string, ...]",
    "references": "[integer, ...]",
    "duplicate_targets": "[integer, ...]",
    "scope_contradictions": "[string, ...]",
}


# ---------------------------------------------------------------- prompts


def prompt_text(name: str) -> str:
    """A versioned prompt file of the package (`prompts/<name>.txt`)."""
    return (resources.files("microctx.candidates.builtins") / "prompts" / f"{name}.txt").read_text(encoding="utf-8")


def prompt_version(config: Config) -> str:
    """The prompt file the run's calls use (mode micro and hybrid: micro.vN; long, chunks: window.vN)."""
    return PROMPTS["micro" if config.mode in ("micro", "hybrid") else "window"]


def system_prompt(name: str, fields: tuple[str, ...]) -> str:
    shape = "{" + ", ".join(['"id": string'] + [f'"{f}": {_SHAPES[f]}' for f in fields]) + "}"
    return prompt_text(name).replace("{FIELDS}", ", ".join(f'"{f}"' for f in fields)).replace("{SHAPE}", shape)


def visible_record(record: dict, hide_metadata: bool, max_chars: int | None = None) -> dict:
    """What the model is shown of a record: id, number, title, body (cut to `max_chars`), and
    state and labels unless the task hides them."""
    body = record["body"] if max_chars is None else record["body"][:max_chars]
    shown = {"id": record["id"], "number": record["number"], "title": record["title"], "body": body}
    if not hide_metadata:
        shown.update(state=record["state"], labels=list(record["labels"] or []))
    return shown


def user_message(records: list[dict], fields: tuple[str, ...], examples: list[dict] | None = None) -> str:
    """The data part of a prompt: the fields asked for, optional similar records, the records (JSON)."""
    lines = [f"FIELDS: {', '.join(fields)}"]
    if examples:
        lines += ["SIMILAR RECORDS (JSON):", orjson.dumps(examples).decode()]
    lines += ["RECORDS (JSON):", orjson.dumps(records).decode()]
    return "\n".join(lines)


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass
class Prompt:
    """One request to make: its messages, the ids of the records it answers, its output budget."""

    messages: list[dict]
    ids: list[str]
    max_tokens: int
    window: bool

    def request(self, config: Config) -> dict:
        body: dict = {
            "model": config.model,
            "messages": self.messages,
            "temperature": config.temperature,
            "max_tokens": self.max_tokens,
        }
        if config.json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    def digest(self, config: Config) -> str:
        """The cache key: SHA-256 of the request without the endpoint URL or the stream flag."""
        return hashlib.sha256(orjson.dumps(self.request(config), option=orjson.OPT_SORT_KEYS)).hexdigest()


def micro_prompts(records: list[dict], config: Config, examples: dict[str, list[dict]] | None = None) -> list[Prompt]:
    system = system_prompt(PROMPTS["micro"], config.fields)
    budget = config.max_tokens or OUTPUT_TOKENS_PER_RECORD * 2
    return [
        Prompt(
            [
                {"role": "system", "content": system},
                {
                    "role": "user",
                    "content": user_message(
                        [visible_record(r, config.hides_metadata)], config.fields, (examples or {}).get(r["id"])
                    ),
                },
            ],
            [r["id"]],
            budget,
            window=False,
        )
        for r in records
    ]


def _window_prompt(shown: list[dict], config: Config, system: str) -> Prompt:
    budget = config.max_tokens or OUTPUT_TOKENS_PER_RECORD * len(shown)
    return Prompt(
        [{"role": "system", "content": system}, {"role": "user", "content": user_message(shown, config.fields)}],
        [r["id"] for r in shown],
        budget,
        window=True,
    )


def long_prompts(records: list[dict], config: Config) -> tuple[list[Prompt], int]:
    """Records packed greedily, in corpus order, into windows that fit `context_tokens` (estimate);
    returns the prompts and how many records had to be truncated to fit a window alone."""
    system = system_prompt(PROMPTS["window"], config.fields)
    fixed = estimate_tokens(system) + estimate_tokens(user_message([], config.fields)) + 16
    prompts: list[Prompt] = []
    window: list[dict] = []
    used, truncated = fixed, 0
    for record in records:
        shown = visible_record(record, config.hides_metadata)
        cost = estimate_tokens(orjson.dumps(shown).decode()) + OUTPUT_TOKENS_PER_RECORD
        if window and used + cost > config.context_tokens:
            prompts.append(_window_prompt(window, config, system))
            window, used = [], fixed
        if fixed + cost > config.context_tokens:  # too long even alone: cut the body to what fits
            room = max(
                0,
                (config.context_tokens - fixed - OUTPUT_TOKENS_PER_RECORD) * CHARS_PER_TOKEN
                - len(orjson.dumps(visible_record(record, config.hides_metadata, 0))),
            )
            shown = visible_record(record, config.hides_metadata, room)
            cost = config.context_tokens - fixed
            truncated += 1
        window.append(shown)
        used += cost
    if window:
        prompts.append(_window_prompt(window, config, system))
    return prompts, truncated


def chunk_prompts(records: list[dict], config: Config) -> list[Prompt]:
    """Windows of `chunk_records` records, each starting `chunk_records - overlap` after the last."""
    system = system_prompt(PROMPTS["window"], config.fields)
    step = config.chunk_records - config.overlap
    prompts = []
    for start in range(0, len(records), step):
        chunk = records[start : start + config.chunk_records]
        prompts.append(_window_prompt([visible_record(r, config.hides_metadata) for r in chunk], config, system))
        if start + config.chunk_records >= len(records):
            break
    return prompts


# ---------------------------------------------------------------- strict answers


def _int_list(value, key: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v < 10**7 for v in value):
        raise ValueError(f"{key}: expected an array of integers 1..9999999")
    return sorted(set(value))


def check_answer(entry: object, fields: tuple[str, ...], expected_id: str | None = None) -> dict:
    """One record's answer in the strict shape, normalised (lists sorted, unique); ValueError says why not."""
    if not isinstance(entry, dict):
        raise ValueError("expected a JSON object")
    keys = {"id", *fields}
    if set(entry) != keys:
        missing, extra = sorted(keys - set(entry)), sorted(set(entry) - keys)
        raise ValueError(f"keys: missing {missing}, unexpected {extra}")
    if not isinstance(entry["id"], str) or (expected_id is not None and entry["id"] != expected_id):
        raise ValueError(f"id: expected {expected_id!r}, got {entry['id']!r}")
    answer: dict = {"id": entry["id"]}
    for key in fields:
        value = entry[key]
        if key == "state":
            if value not in ("OPEN", "CLOSED"):
                raise ValueError(f"state: expected OPEN or CLOSED, got {value!r}")
            answer[key] = value
        elif key == "labels":
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ValueError("labels: expected an array of non-empty strings")
            answer[key] = sorted(set(value))
        elif key == "scope_contradictions":
            if not isinstance(value, list) or not all(v in CUE_WORDS for v in value):
                raise ValueError(f"scope_contradictions: expected an array of {', '.join(CUE_WORDS)}")
            answer[key] = sorted(set(value))
        else:
            answer[key] = _int_list(value, key)
    return answer


def parse_content(content: str) -> object:
    """The model's message as JSON (one surrounding ``` fence is tolerated); ValueError if not JSON."""
    text = content.strip()
    if text.startswith("```") and text.endswith("```"):
        text = text[3:-3]
        text = text[4:] if text.startswith("json") else text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None


def parse_answers(prompt: Prompt, content: str, fields: tuple[str, ...]) -> tuple[dict[str, dict], dict[str, str]]:
    """(answers by id, problems by id) for the records a prompt asked about."""
    problems: dict[str, str] = {}
    answers: dict[str, dict] = {}
    try:
        document = parse_content(content)
        if prompt.window:
            if not isinstance(document, dict) or set(document) != {"answers"} or not isinstance(document["answers"], list):
                raise ValueError('expected {"answers": [...]}')
            entries = document["answers"]
        else:
            entries = [document]
    except ValueError as exc:
        return {}, {rid: str(exc) for rid in prompt.ids}
    wanted = set(prompt.ids)
    for entry in entries:
        rid = entry.get("id") if isinstance(entry, dict) else None
        if rid not in wanted or rid in answers:
            continue  # an answer for a record not asked about (or a repeat) is ignored
        try:
            answers[rid] = check_answer(entry, fields, rid)
        except ValueError as exc:
            problems[rid] = str(exc)
    if not prompt.window and not answers and not problems:
        try:
            check_answer(entries[0], fields, prompt.ids[0])
        except ValueError as exc:
            problems[prompt.ids[0]] = str(exc)
    for rid in prompt.ids:
        if rid not in answers and rid not in problems:
            problems[rid] = "no answer for this record"
    return answers, problems


def reduce_answers(answers: list[dict], fields: tuple[str, ...]) -> dict:
    """Several answers for one record (overlapping chunks) made one: state by majority (ties to
    the first), list facts kept when at least half of the answers give them."""
    if len(answers) == 1:
        return answers[0]
    merged: dict = {"id": answers[0]["id"]}
    for key in fields:
        if key == "state":
            counts = Counter(a["state"] for a in answers)
            best = max(counts.values())
            merged[key] = next(a["state"] for a in answers if counts[a["state"]] == best)
        else:
            counts = Counter(v for a in answers for v in a[key])
            merged[key] = sorted(v for v, n in counts.items() if 2 * n >= len(answers))
    return merged
