"""Model usage as the runner can see it on the wire, and its reconciliation with the candidate's counters.

The seam between the llm candidate and the runner's recording proxy (the sandbox's record mode):
where the proxy can read the traffic (plain HTTP), it can count the chat completion calls and
read each response's `usage` itself, so the manifest can show the runner's count beside the
candidate's and flag any difference. Both functions are pure: bytes and dicts in, dicts out.

- `usage_from_response(content_type, body)`: the `usage` of one chat completion response body,
  plain JSON or a server-sent event stream (`stream_options.include_usage` puts it in the last
  event); None when the body carries none.
- `reconcile(requests, counters, base_url)`: `requests` are the proxy's entries, each a dict with
  `host` ("HOST:PORT" or "HOST"), `method`, `path`, `status` and, when read, `usage` (from
  `usage_from_response`); returns the runner's counts, the candidate's, and the differences.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import orjson

COMPARED = ("model_calls", "input_tokens", "output_tokens", "cached_tokens")


def read_usage(raw: object) -> dict | None:
    """prompt, completion and cached tokens of a `usage` object (OpenAI's shape), or None."""
    if not isinstance(raw, dict):
        return None
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": cached if isinstance(cached, int) else 0}


def usage_from_response(content_type: str, body: bytes) -> dict | None:
    """prompt/completion/cached tokens of a chat completion response (JSON or SSE), or None."""
    if "text/event-stream" in (content_type or ""):
        from microctx._io.http import SSE_DONE, sse_data

        found = None
        for payload in sse_data(body.decode("utf-8", "replace").splitlines()):
            if payload == SSE_DONE:
                break
            try:
                event = orjson.loads(payload)
            except orjson.JSONDecodeError:
                continue
            if isinstance(event, dict) and event.get("usage"):
                found = read_usage(event["usage"]) or found
        return found
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return read_usage(document.get("usage")) if isinstance(document, dict) else None


def _host(base_url: str) -> tuple[str, str]:
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname}:{port}", parts.path.rstrip("/") + "/chat/completions"


def reconcile(requests: list[dict], counters: dict, base_url: str) -> dict:
    """The runner's count of chat completion calls and tokens beside the candidate's, differences flagged.

    A request counts as a model call when it is a POST to the endpoint's host and its
    `/chat/completions` path (a host given without a port means the scheme's default port).
    Token totals are only compared when the proxy read a usage for every answered call (HTTPS
    through CONNECT is opaque: then only calls are compared, and `tokens_seen` says so).
    """
    host, path = _host(base_url)
    default_port = host.rsplit(":", 1)[1]

    def same_host(value: str) -> bool:
        return (value if ":" in value else f"{value}:{default_port}") == host

    calls = [
        r for r in requests if r.get("method") == "POST" and same_host(str(r.get("host", ""))) and (r.get("path") in (None, path))
    ]
    answered = [r for r in calls if r.get("status") == 200]
    usages = [r["usage"] for r in answered if isinstance(r.get("usage"), dict)]
    tokens_seen = len(usages) == len(answered) and all(r.get("path") is not None for r in calls)
    runner = {"model_calls": len(calls)}
    if tokens_seen:
        runner.update(
            input_tokens=sum(u["prompt_tokens"] for u in usages),
            output_tokens=sum(u["completion_tokens"] for u in usages),
            cached_tokens=sum(u.get("cached_tokens", 0) for u in usages),
        )
    candidate = {key: counters.get(key) for key in COMPARED}
    differences = [
        f"{key}: runner {runner[key]}, candidate {candidate[key]}"
        for key in COMPARED
        if key in runner and runner[key] != candidate[key]
    ]
    return {
        "runner": runner,
        "candidate": candidate,
        "tokens_seen": tokens_seen,
        "differences": differences,
        "agree": not differences,
    }
