"""The model gateway's token and dollar budgets, kept before a call is forwarded, not only after.

Each call reserves its worst case before it reaches the model: an input estimate (the bytes of the
request body: a byte-level tokenizer never makes more tokens of a text than it has bytes, and the
JSON around the messages outweighs the few tokens a chat format adds per message) plus its output
bound (`max_completion_tokens` or `max_tokens` of a chat completion, `max_tokens` of a completion,
`max_output_tokens` of a response), times its choices (`n`, `best_of`) and, for a completion, its
prompts (`prompt` may be a list of prompts, each answered with its own choices). A call that asks for no
bound, or for more than is left, gets the bound set to what is left (`capped_calls`). A call that
would fit alone but not beside the calls in flight waits until they end (`waited_calls`); a call
that does not fit even alone is refused, and the run fails over budget. When a call ends, its
reservation is released and its real usage counted; a call answered 200 without a `usage` keeps
its whole reservation as spent (`charged_without_usage_tokens`), since what it cost is unknown.
Embeddings reserve their input only; with a token or dollar budget, any other POST is refused
(the gateway could not bound what it generates).

So the totals the endpoint reports never pass the budget, as long as the endpoint honours the
output bound it is sent and reports no more input tokens than the request has bytes (text in, no
images or audio, whose tokens do not follow their bytes). The model-call budget is exact in any
case. The dollars assume the prices given (`--model-price`) are the endpoint's.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import orjson

from microctx.candidates.settings import GatewaySettings

GENERATION_PATHS = {  # the endpoint paths (after /v1) whose output the gateway bounds, and their fields
    "/chat/completions": ("max_completion_tokens", "max_tokens"),
    "/completions": ("max_tokens",),
    "/responses": ("max_output_tokens",),
}
INPUT_ONLY_PATHS = ("/embeddings",)
MAX_CHOICES = 128
WAIT_SECONDS = 600.0  # the longest a call waits for the calls in flight to end (a call's own timeout)


@dataclass(frozen=True)
class Ask:
    """What a call may spend: input estimate, the field bounding its output, its own bound, choices."""

    input_tokens: int
    field: str | None = None
    requested: int | None = None
    choices: int = 0  # 0: nothing generated (embeddings, a GET)


@dataclass(frozen=True)
class Reservation:
    """What a call in flight holds of the budgets: its worst case in tokens and dollars."""

    tokens: int = 0
    dollars: float = 0.0


def dollars_of(settings: GatewaySettings, input_tokens: int, cached_tokens: int, output_tokens: int) -> float:
    """Dollars of so many tokens at the settings' prices (per million; cached input at its own price)."""
    cached_price = settings.price_in if settings.price_cached is None else settings.price_cached
    fresh = max(0, input_tokens - cached_tokens)
    return (fresh * settings.price_in + cached_tokens * cached_price + output_tokens * settings.price_out) / 1e6


def read_ask(method: str, rest: str, body: bytes) -> Ask | str:
    """What the call at `rest` (its path after /v1) may spend, or why it cannot be bounded."""
    if method in ("GET", "HEAD"):
        return Ask(0)
    path = rest.split("?", 1)[0].rstrip("/")
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        document = None
    if not isinstance(document, dict):
        return "with a token or dollar budget, the gateway forwards only calls with a JSON object body"
    if path in INPUT_ONLY_PATHS:
        return Ask(len(body))
    fields = GENERATION_PATHS.get(path)
    if fields is None:
        known = ", ".join(["/v1" + p for p in (*GENERATION_PATHS, *INPUT_ONLY_PATHS)])
        return f"with a token or dollar budget, the gateway forwards only {known} (it bounds their output)"
    present = [f for f in fields if f in document]
    requested = document[present[0]] if present else None
    if requested is not None and (isinstance(requested, bool) or not isinstance(requested, int) or requested < 1):
        return f"{present[0]} must be a positive whole number, got {requested!r}"
    choices = 1
    for key in ("n", "best_of"):
        value = document.get(key, 1)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CHOICES:
            return f"{key} must be a whole number from 1 to {MAX_CHOICES}, got {value!r}"
        choices = max(choices, value)
    if path == "/completions":  # a list of prompts is a batch: every prompt gets its own choices
        choices *= _prompts(document.get("prompt"))
    return Ask(len(body), present[0] if present else fields[0], requested, choices)


def _prompts(prompt: object) -> int:
    """How many prompts a completion's `prompt` holds: a string or one list of token ids is one;
    a list of strings or of token lists is one per item."""
    if isinstance(prompt, list) and prompt and not all(isinstance(x, int) and not isinstance(x, bool) for x in prompt):
        return len(prompt)
    return 1


class Budget:
    """Reservations and spending against `settings`' token and dollar budgets (thread-safe)."""

    def __init__(self, settings: GatewaySettings):
        self.settings = settings
        self.cond = threading.Condition()
        self.used_tokens = 0  # reported usage plus what calls without usage were charged
        self.used_dollars = 0.0
        self.reserved = Reservation()
        self.in_flight = 0
        self.capped_calls = self.waited_calls = 0
        self.charged_without_usage_tokens = 0

    @property
    def sized(self) -> bool:
        """True when there is a token or dollar budget to keep."""
        return self.settings.max_tokens is not None or self.settings.max_dollars is not None

    def _input_price(self) -> float:
        """Dollars per input token at the dearer of the fresh and cached prices (a worst case)."""
        s = self.settings
        return max(s.price_in, s.price_cached if s.price_cached is not None else 0.0) / 1e6

    def _output_room(self, ask: Ask, tokens_left: float, dollars_left: float) -> float:
        """The most output tokens per choice the call may have with so much left (inf: no bound)."""
        room = math.inf
        if self.settings.max_tokens is not None:
            room = (tokens_left - ask.input_tokens) / max(ask.choices, 1)
        if self.settings.max_dollars is not None:
            left = dollars_left - ask.input_tokens * self._input_price()
            price_out = self.settings.price_out / 1e6
            room = min(room, left / (price_out * max(ask.choices, 1)) if price_out > 0 else (math.inf if left >= 0 else -1))
        if ask.choices == 0:
            return math.inf if room >= 0 else -1
        return math.floor(room) if room != math.inf else room

    def _left(self, *, with_reserved: bool) -> tuple[float, float]:
        """(tokens, dollars) left of the budgets (inf: none set), less what calls in flight hold
        when `with_reserved`."""
        s = self.settings
        tokens = (s.max_tokens if s.max_tokens is not None else math.inf) - self.used_tokens
        dollars = (s.max_dollars if s.max_dollars is not None else math.inf) - self.used_dollars
        if with_reserved:
            tokens, dollars = tokens - self.reserved.tokens, dollars - self.reserved.dollars
        return tokens, dollars

    def reserve(self, ask: Ask) -> tuple[str, int | None, Reservation]:
        """("", the output bound to set or None, the reservation) once the call fits beside the calls in
        flight (waiting for them if it must), or (why, None, nothing) when it cannot fit at all.
        Called with `cond` held."""
        deadline = time.monotonic() + WAIT_SECONDS
        waited = False
        while True:
            alone = self._output_room(ask, *self._left(with_reserved=False))
            if alone < 1:
                return self._refusal(ask), None, Reservation()
            room = self._output_room(ask, *self._left(with_reserved=True))
            if room >= 1 or self.in_flight == 0:
                break
            waited = True
            if not self.cond.wait(timeout=max(0.0, deadline - time.monotonic())) and time.monotonic() >= deadline:
                return "over budget: the calls in flight did not end in time to leave room for this one", None, Reservation()
        self.waited_calls += waited
        output = ask.requested if ask.requested is not None else math.inf
        cap = None
        if ask.choices and room < output:
            cap = int(room)
            output = cap
            self.capped_calls += 1
        spent = 0 if output == math.inf else int(output) * ask.choices
        dollars = ask.input_tokens * self._input_price() + spent * self.settings.price_out / 1e6
        reservation = Reservation(ask.input_tokens + spent, dollars)
        self.reserved = Reservation(self.reserved.tokens + reservation.tokens, self.reserved.dollars + reservation.dollars)
        self.in_flight += 1
        return "", cap, reservation

    def _refusal(self, ask: Ask) -> str:
        """Why a call does not fit even alone: the token budget when that is short, else the dollars."""
        s = self.settings
        tokens, dollars = self._left(with_reserved=False)
        if s.max_tokens is not None and tokens < ask.input_tokens + max(ask.choices, 1):
            return (
                f"over budget: {self.used_tokens} tokens used, a call of up to {ask.input_tokens} input tokens does not fit "
                f"in the {s.max_tokens} tokens (--max-tokens)"
            )
        return f"over budget: ${self.used_dollars:.6f} used, a call of up to {ask.input_tokens} input tokens does not fit in ${s.max_dollars:g} (--max-dollars)"

    def settle(self, reservation: Reservation, status: int | None, usage: dict | None) -> None:
        """A call ended: release its reservation and count what it used (called with `cond` held)."""
        self.reserved = Reservation(self.reserved.tokens - reservation.tokens, self.reserved.dollars - reservation.dollars)
        self.in_flight -= 1
        if usage is not None:
            self.used_tokens += usage["prompt_tokens"] + usage["completion_tokens"]
            self.used_dollars += dollars_of(
                self.settings, usage["prompt_tokens"], usage["cached_tokens"], usage["completion_tokens"]
            )
        elif status == 200:  # answered, cost unknown: it keeps its whole reservation
            self.used_tokens += reservation.tokens
            self.used_dollars += reservation.dollars
            self.charged_without_usage_tokens += reservation.tokens
        self.cond.notify_all()
