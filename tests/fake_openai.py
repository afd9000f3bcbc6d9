"""A deterministic local OpenAI-compatible server for the model-candidate tests (127.0.0.1, a free port).

`FakeOpenAI` serves `POST /v1/completions` (the legacy endpoint: every prompt of a `prompt` list
answered `n` times, each answer exactly `max_tokens` tokens long, 16 without one, as a model that
never stops early) and `POST /v1/chat/completions`, plain JSON or streamed (SSE, with
`stream_options.include_usage` honoured: a last chunk carrying `usage`; with `honour_max_tokens`,
an answer is cut to the request's `max_completion_tokens` or `max_tokens`, as a real model cuts it). It answers like a
perfect extractor: it reads the records out of the prompt (the JSON after `RECORDS (JSON):`) and
the fields asked for (`FIELDS:`), and derives each fact from the record with the contract's own
functions (state and labels from the record, or from `oracle` when the prompt hides them). With
`wrong={"drop_label": L, "add_reference": N}` it answers wrongly in exactly those ways.

Usage is deterministic: prompt tokens = characters of all messages / 4 (rounded up), completion
tokens = characters of the answer / 4 (rounded up), cached tokens = the system prompt's tokens
when an earlier request had the same system prompt (a prefix cache).

Faults, planted per record id (`faults[id]`: a list of behaviours for the successive requests
that carry that record; once used up, requests are answered normally):
- "429": status 429 with `Retry-After: <retry_after>`; "500": status 500;
- "slow": sleeps `slow_seconds` before answering (to pass a call deadline);
- "malformed": a valid response whose content is not the strict JSON shape;
- "badshape": content that is JSON but has a wrong key;
- "garbage": status 200 with a body that is not a chat completion;
- "cutstream": a stream that stops before `[DONE]` (a dropped connection).
A semantic-layer judge prompt (a user message starting `JUDGE ITEM (JSON):`, microctx.semantic.judge)
is answered `{"label": judge(item)}` when a `judge` callable is given (item: the parsed JSON).
Every request is logged in `requests` (ids, status, stream, usage returned, the Authorization
header, the request body, the response's content type and bytes), so a test can compare a candidate's counters with what the server saw.
"""

from __future__ import annotations

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from microctx.contract.patterns import duplicate_targets, issue_text, references, scope_contradictions


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def prompt_records(content: str) -> tuple[list[str], list[dict]]:
    """(fields asked, records given) from a user message of the llm candidate."""
    fields: list[str] = []
    records: list[dict] = []
    lines = content.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("FIELDS: "):
            fields = [f.strip() for f in line[len("FIELDS: ") :].split(",")]
        if line == "RECORDS (JSON):":
            records = json.loads("\n".join(lines[i + 1 :]))
    return fields, records


class FakeOpenAI:
    def __init__(
        self,
        *,
        oracle: dict | None = None,
        wrong: dict | None = None,
        faults: dict | None = None,
        retry_after: str = "0",
        slow_seconds: float = 2.0,
        chunk_chars: int = 40,
        delay: float = 0.0,
        judge=None,
        honour_max_tokens: bool = False,
    ):
        self.oracle = oracle or {}
        self.judge = judge
        self.honour_max_tokens = honour_max_tokens  # cut the answer to max_completion_tokens/max_tokens, as a real model does
        self.wrong = wrong or {}
        self.faults = {k: list(v) for k, v in (faults or {}).items()}
        self.retry_after = retry_after
        self.slow_seconds = slow_seconds
        self.chunk_chars = chunk_chars
        self.delay = delay  # seconds every request waits (so concurrent calls overlap)
        self.in_flight = self.max_in_flight = 0  # requests being served at once, and the most seen
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self._seen_systems: set[str] = set()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------ what the server answers

    def answer(self, record: dict, fields: list[str]) -> dict:
        rid = record["id"]
        gold = self.oracle.get(rid, {})
        text = issue_text(record["title"], record["body"])
        facts = {
            "state": record["state"] if record.get("state") in ("OPEN", "CLOSED") else gold.get("state", "OPEN"),
            "labels": sorted(record["labels"] if "labels" in record else gold.get("labels", [])),
            "references": references(text),
            "duplicate_targets": duplicate_targets(text),
            "scope_contradictions": scope_contradictions(record["body"]),
        }
        if self.wrong.get("drop_label") in facts["labels"]:
            facts["labels"] = [x for x in facts["labels"] if x != self.wrong["drop_label"]]
        if self.wrong.get("add_reference"):
            facts["references"] = sorted(set(facts["references"]) | {self.wrong["add_reference"]})
        return {"id": rid, **{f: facts[f] for f in fields}}

    def _behaviour(self, ids: list[str]) -> str:
        with self.lock:
            for rid in ids:
                planned = self.faults.get(rid)
                if planned:
                    return planned.pop(0)
        return "ok"

    def _handler(self):
        return type("Handler", (_FakeHandler,), {"fake": self})

    def _log(self, entry: dict) -> None:
        with self.lock:
            self.requests.append(entry)

    # ------------------------------------------------------------ what the server saw

    def totals(self) -> dict:
        with self.lock:
            answered = [r["usage"] for r in self.requests if r["usage"]]
            return {
                "requests": len(self.requests),
                "input_tokens": sum(u["prompt_tokens"] for u in answered),
                "output_tokens": sum(u["completion_tokens"] for u in answered),
                "cached_tokens": sum(u["prompt_tokens_details"]["cached_tokens"] for u in answered),
            }


class _FakeHandler(BaseHTTPRequestHandler):
    """The fake's request handler; `fake` is set on the subclass each server makes."""

    fake: FakeOpenAI

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):
        with self.fake.lock:
            self.fake.in_flight += 1
            self.fake.max_in_flight = max(self.fake.max_in_flight, self.fake.in_flight)
        self._counted = True
        try:
            if self.fake.delay:
                time.sleep(self.fake.delay)
            self._post()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a call deadline)
            pass
        finally:
            self._leave()

    def _leave(self):
        """No longer in flight: called before the last bytes go out, since the client may
        send its next request as soon as it has them."""
        if self._counted:
            self._counted = False
            with self.fake.lock:
                self.fake.in_flight -= 1

    def _post(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        entry = {
            "path": self.path,
            "authorization": self.headers.get("Authorization"),
            "stream": bool(body.get("stream")),
            "status": 200,
            "usage": None,
            "body": body,
        }
        self.fake._log(entry)  # logged on arrival, so the count is right even for a client that gave up
        self._entry = entry
        if self.path == "/v1/completions":
            return self._completions(body)
        if self.path != "/v1/chat/completions":
            entry["status"] = 404
            return self._send(404, b'{"error": "not found"}')
        system = body["messages"][0]["content"]
        fields, records = prompt_records(body["messages"][-1]["content"])
        ids = [r["id"] for r in records]
        entry["ids"] = ids
        behaviour = self.fake._behaviour(ids)
        entry["behaviour"] = behaviour
        if behaviour in ("429", "500"):
            entry["status"] = int(behaviour)
            headers = {"Retry-After": self.fake.retry_after} if behaviour == "429" else {}
            return self._send(int(behaviour), b'{"error": {"message": "planted"}}', headers)
        if behaviour == "slow":
            time.sleep(self.fake.slow_seconds)
        if behaviour == "garbage":
            return self._send(200, b"<html>this is not a chat completion</html>")
        content = self._content(behaviour, body, system, fields, records)
        bound = body.get("max_completion_tokens", body.get("max_tokens"))
        if self.fake.honour_max_tokens and isinstance(bound, int) and tokens(content) > bound:
            content = content[: bound * 4]  # finish_reason "length": at most `bound` completion tokens
        prompt_tokens = sum(tokens(m["content"]) for m in body["messages"])
        with self.fake.lock:
            cached = tokens(system) if system in self.fake._seen_systems else 0
            self.fake._seen_systems.add(system)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": tokens(content),
            "total_tokens": prompt_tokens + tokens(content),
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        entry["usage"] = usage
        if body.get("stream"):
            return self._stream(
                content,
                usage if (body.get("stream_options") or {}).get("include_usage") else None,
                cut=behaviour == "cutstream",
            )
        envelope = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage,
        }
        return self._send(200, json.dumps(envelope).encode())

    def _completions(self, body: dict):
        prompt = body.get("prompt", "")
        prompts = prompt if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) else [prompt]
        bound, n = body.get("max_tokens", 16), body.get("n", 1)
        choices = [{"index": i, "text": "word" * bound, "finish_reason": "length"} for i in range(len(prompts) * n)]
        prompt_tokens = sum(tokens(p) if isinstance(p, str) else len(p) for p in prompts)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(choices) * bound,
            "total_tokens": prompt_tokens + len(choices) * bound,
            "prompt_tokens_details": {"cached_tokens": 0},
        }
        self._entry["usage"] = usage
        envelope = {"id": "cmpl-fake", "object": "text_completion", "model": body.get("model"), "choices": choices}
        return self._send(200, json.dumps({**envelope, "usage": usage}).encode())

    def _content(self, behaviour: str, body: dict, system: str, fields: list[str], records: list[dict]) -> str:
        """What the planted behaviour or the prompt kind makes the fake answer."""
        if behaviour == "malformed":
            return "Sure! Here are the facts you asked for: state open."
        elif behaviour == "badshape":
            return json.dumps({**self.fake.answer(records[0], fields), "confidence": 0.9})
        elif self.fake.judge is not None and body["messages"][-1]["content"].startswith("JUDGE ITEM (JSON):\n"):
            item = json.loads(body["messages"][-1]["content"].split("\n", 1)[1])
            return json.dumps({"label": self.fake.judge(item)})
        elif '"answers"' in system:  # a window prompt (long, chunks)
            return json.dumps({"answers": [self.fake.answer(r, fields) for r in records]})
        else:
            return json.dumps(self.fake.answer(records[0], fields))

    def _send(self, status: int, data: bytes, headers: dict | None = None):
        self._entry.update(content_type="application/json", response=data)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self._leave()
        self.wfile.write(data)

    def _stream(self, content: str, usage: dict | None, cut: bool = False):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

        self._entry.update(content_type="text/event-stream", response=b"")

        def write(data: bytes) -> None:
            self._entry["response"] += data
            self.wfile.write(data)
            self.wfile.flush()

        def event(payload: dict) -> None:
            write(b"data: " + json.dumps(payload).encode() + b"\n\n")

        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk"}
        event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        for start in range(0, len(content), self.fake.chunk_chars):
            event({**base, "choices": [{"index": 0, "delta": {"content": content[start : start + self.fake.chunk_chars]}}]})
        if cut:
            self._leave()
            return
        event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if usage is not None:
            event({**base, "choices": [], "usage": usage})
        self._leave()
        write(b"data: [DONE]\n\n")
