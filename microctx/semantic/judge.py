"""A model judge: one more annotator behind an OpenAI-compatible endpoint, used only when it has earned it.

`run_judge` asks the model every study item and, for `cue` questions, every record outside the
study (the unlabelled pool), one chat completion each. The calls go through the sandbox's record
mode proxy (microctx.candidates.network.RecordingProxy, allowed to reach the endpoint's host and
port only), so the calls and tokens are counted by the proxy, not by the judge's own say; the
count is written to `judge-<model>.json` in the study folder. Each answer is a `judge` event in
the log (annotator `judge:<model>`).

At freeze (`judge_section`): the judge's agreement with the adjudicated gold is measured on the
*tune* items (the study's `judge.measure`, cluster-bootstrap interval over components). The judge
is used only when the interval's lower end clears the study's `judge.bar`, set in the study file
before anyone looked. When used, the share of records without a cue whose gold would be the
positive label is estimated by prediction-powered inference (PPI, Angelopoulos et al. 2023, no
power tuning, lam = 1): the judge's mean over the unlabelled pool, corrected by the mean of
gold minus judge on the sampled no-cue items; normal interval with the two variances added.
It assumes the sampled items are a simple random sample of the no-cue records (they are, per
split; the pool is treated as one population) and items independent (components are not
modelled here: PPI's variance is the independent-sample one, say so when reading it). A judge
below the bar leaves every estimate to the human labels alone, and the document says why.
"""

from __future__ import annotations

import http.client
import math
import os
import socket
import ssl
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from microctx._io.atomic import atomic_write
from microctx._io.paths import safe_name_from
from microctx.contract.canonical import dumps
from microctx.errors import InputError, scrub_url
from microctx.grading.stats import Z95
from microctx.semantic import events as ev
from microctx.semantic.agreement import agreement_rows
from microctx.semantic.items import StudyFolder, item_id
from microctx.semantic.study import Question

JUDGE_PREFIX = "judge:"
ITEM_MARK = "JUDGE ITEM (JSON):"


class _ProxiedHTTP(http.client.HTTPConnection):
    """Plain HTTP whose socket is the record-mode proxy's Unix socket (absolute-URI requests)."""

    socket_path = ""

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


class _ProxiedHTTPS(http.client.HTTPSConnection):
    """HTTPS through a CONNECT tunnel opened on the record-mode proxy's Unix socket."""

    socket_path = ""

    def connect(self) -> None:
        _ProxiedHTTP.connect(self)  # type: ignore[arg-type]
        self._tunnel()  # type: ignore[attr-defined]
        host = self._tunnel_host  # type: ignore[attr-defined]
        self.sock = ssl.create_default_context().wrap_socket(self.sock, server_hostname=host)


def _plain_exchange(socket_path: str, url: str, body: bytes, headers: dict, timeout: float) -> tuple[int, bytes]:
    """One plain-HTTP request through the proxy, read to the end: the proxy closes the connection
    (`Connection: close`) after the response, so reading until EOF lets it finish the exchange and
    log the response's usage (closing early would break its pipe)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(socket_path)
        lines = [
            f"POST {url} HTTP/1.1",
            *(f"{k}: {v}" for k, v in headers.items()),
            f"Content-Length: {len(body)}",
            "Connection: close",
            "",
            "",
        ]
        sock.sendall("\r\n".join(lines).encode() + body)
        raw = bytearray()
        while chunk := sock.recv(65536):
            raw += chunk
    finally:
        sock.close()
    response = http.client.HTTPResponse(_Bytes(bytes(raw)))  # type: ignore[arg-type]
    response.begin()
    return response.status, response.read()


class _Bytes:
    """A socket-like object over bytes already read, for http.client's response parser."""

    def __init__(self, data: bytes):
        self.data = data

    def makefile(self, *_args, **_kw):
        import io

        return io.BytesIO(self.data)


def _through_proxy(socket_path: str, url: str, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    """A connection to `url` through the record-mode proxy, and the request target.

    http: an absolute-URI request (the proxy reads the response and counts its tokens); https: a
    CONNECT tunnel, TLS end to end with the host (the proxy counts the call, the bytes are opaque)."""
    parts = urlsplit(url)
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = _ProxiedHTTPS("record-proxy", timeout=timeout)
        connection.set_tunnel(parts.hostname or "", parts.port or 443)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
    else:
        connection = _ProxiedHTTP("record-proxy", timeout=timeout)
        target = url
    connection.socket_path = socket_path
    return connection, target


def prompt(question, guideline: str, record: dict, target: dict | None) -> list[dict]:
    system = (
        f"You label GitHub issues for a study. Guideline:\n{guideline}\n"
        f'Answer with JSON only: {{"label": one of {question.labels}}}.'
    )
    shown = {"question": question.text, "labels": question.labels, "title": record["title"], "body": record["body"]}
    if target is not None:
        shown["duplicate_of"] = {"number": target["number"], "title": target["title"], "body": target["body"]}
    return [{"role": "system", "content": system}, {"role": "user", "content": f"{ITEM_MARK}\n{orjson.dumps(shown).decode()}"}]


def _ask(socket_path: str, url: str, model: str, messages: list[dict], key: str | None, timeout: float) -> str:
    body = orjson.dumps({"model": model, "messages": messages, "temperature": 0})
    headers = {"Content-Type": "application/json", "Host": urlsplit(url).netloc}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if url.startswith("http://"):
        status, data = _plain_exchange(socket_path, url, body, headers, timeout)
    else:
        connection, target = _through_proxy(socket_path, url, timeout)
        try:
            connection.request("POST", target, body=body, headers=headers)
            response = connection.getresponse()
            status, data = response.status, response.read()
        finally:
            connection.close()
    if status != 200:
        raise InputError("--base-url", f"the model endpoint answered HTTP {status}")
    try:
        return str(orjson.loads(orjson.loads(data)["choices"][0]["message"]["content"])["label"])
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        return ""


def _work(folder: StudyFolder, public: dict) -> list[tuple[str, Question, dict, dict | None]]:
    """(item id, question, record, duplicate target record) for every item and the unlabelled pool."""
    study = folder.study()
    by_id = {r["id"]: r for r in public["records"]}
    questions = {q.id: q for q in study.question}
    work: list[tuple[str, Question, dict, dict | None]] = []
    for name, row in sorted(folder.items.items()):
        target = by_id.get(f"issue-{row['target']}") if "target" in row else None
        work.append((name, questions[row["question"]], by_id[row["record_id"]], target))
    for q in study.question:
        if q.kind == "cue":
            studied = {row["record_id"] for row in folder.items.values() if row["question"] == q.id}
            work += [(item_id(q.id, r["id"]), q, r, None) for r in public["records"] if r["id"] not in studied]
    return work


def run_judge(
    folder_path,
    base_url: str,
    model: str,
    *,
    api_key_env: str | None = None,
    timeout: float = 60.0,
    limit: int | None = None,
    concurrency: int = 4,
) -> dict:
    """Ask the model every item (and the pool); append its labels; write judge-<model>.json."""
    from microctx.candidates.network import RecordingProxy

    folder = StudyFolder(folder_path)
    _, public = folder.sources()
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError("--base-url", f"expected http(s)://HOST[:PORT]/..., got {scrub_url(base_url)!r}")
    key = os.environ.get(api_key_env) if api_key_env else None
    guideline = (folder.path / "guideline.md").read_text()
    url = base_url.rstrip("/") + "/chat/completions"
    annotator = JUDGE_PREFIX + model
    work = _work(folder, public)[:limit]
    with tempfile.TemporaryDirectory(prefix="mctx-judge-") as scratch:
        with RecordingProxy(
            Path(scratch) / "proxy.sock", [f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"]
        ) as proxy:

            def one(task):
                name, q, record, target = task
                return name, _ask(str(proxy.socket_path), url, model, prompt(q, guideline, record, target), key, timeout), q

            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                found = list(pool.map(one, work))
        network = proxy.record()
    ev.append(
        folder.events_path,
        [
            {
                "annotator": annotator,
                "item": name,
                "kind": "judge",
                "label": label if label in q.labels else None,
                "note": "" if label in q.labels else "unusable answer",
                "guideline_version": folder.guideline_version,
            }
            for name, label, q in found
        ],
    )
    usage = [r.get("usage") or {} for r in network["requests"]]
    summary = {
        "model": model,
        "base_url": scrub_url(base_url),
        "items": len(found),
        "unusable": sum(1 for _, label, q in found if label not in q.labels),
        "calls": len(network["requests"]),
        "denied": len(network["denied"]),
        "input_tokens": sum(int(u.get("prompt_tokens") or 0) for u in usage),
        "output_tokens": sum(int(u.get("completion_tokens") or 0) for u in usage),
    }
    atomic_write(folder.path / f"judge-{safe_name_from(model)}.json", dumps({**summary, "network": network}))
    return summary


def ppi_mean(gold: list[float], judged: list[float], pool: list[float], z: float = Z95) -> dict:
    """Prediction-powered mean (lam = 1) and its normal interval; the classical mean beside it."""
    n, big_n = len(gold), len(pool)
    rect = [g - j for g, j in zip(gold, judged, strict=True)]
    mean = sum(pool) / big_n + sum(rect) / n
    var = _var(pool) / big_n + _var(rect) / n
    classical = sum(gold) / n
    return {
        "estimate": mean,
        "ci_low": mean - z * math.sqrt(var),
        "ci_high": mean + z * math.sqrt(var),
        "labelled": n,
        "unlabelled": big_n,
        "classical": classical,
        "classical_ci": [classical - z * math.sqrt(_var(gold) / n), classical + z * math.sqrt(_var(gold) / n)],
    }


def _var(values: list[float]) -> float:
    m = sum(values) / len(values)
    return sum((v - m) ** 2 for v in values) / len(values)  # ddof 0, as ppi_python


def judge_section(folder: StudyFolder, log: list[dict], gold: dict[str, str], *, n_boot: int, seed: int) -> list[dict]:
    """One entry per judge in the log: its tune agreement with gold, whether it is used, and the
    PPI estimates it makes (only when used)."""
    study = folder.study()
    judged: dict[str, dict[str, str]] = {}
    for (annotator, item), event in ev.current_labels(log, "judge").items():
        if event["label"] is not None and event["guideline_version"] == folder.guideline_version:
            judged.setdefault(annotator, {})[item] = event["label"]
    out = []
    for annotator, labels in sorted(judged.items()):
        tune = [i for i, row in folder.items.items() if row["split"] == "tune" and i in labels]
        entry: dict = {"annotator": annotator, "measure": study.judge.measure, "bar": study.judge.bar, "estimates": []}
        pairs = {i: {"gold": gold[i], "judge": labels[i]} for i in tune}
        categories = sorted({x for q in study.question for x in q.labels})
        row = next(
            r
            for r in agreement_rows(
                pairs, {i: folder.items[i]["component"] for i in tune}, categories, ["gold", "judge"], n_boot=n_boot, seed=seed
            )
            if r["measure"] == study.judge.measure
        )
        entry["tune_agreement"] = row
        entry["used"] = bool(row["ci_low"] >= study.judge.bar)
        if not entry["used"]:
            entry["reason"] = (
                f"the lower end of its tune {study.judge.measure} interval ({row['ci_low']:.3f}) is below "
                f"the study's bar {study.judge.bar}: no estimate uses its labels"
            )
        else:
            entry["estimates"] = _estimates(folder, study, labels, gold)
        out.append(entry)
    return out


def _estimates(folder: StudyFolder, study, labels: dict[str, str], gold: dict[str, str]) -> list[dict]:
    from microctx.contract.patterns import scope_contradictions

    found = []
    for q in study.question:
        if q.kind != "cue":
            continue
        sampled = [
            i
            for i, row in folder.items.items()
            if row["question"] == q.id and i in labels and not scope_contradictions(folder.records[row["record_id"]]["body"])
        ]
        pool = [lab for i, lab in labels.items() if i.startswith(q.id + ":") and i not in folder.items]
        if not sampled or not pool:
            continue
        estimate = ppi_mean(
            [float(gold[i] == q.positive) for i in sampled],
            [float(labels[i] == q.positive) for i in sampled],
            [float(x == q.positive) for x in pool],
        )
        found.append(
            {
                "question": q.id,
                "what": "share of records without a cue word whose label is the positive one",
                "method": "prediction-powered inference (lam = 1), judge labels on the unlabelled pool",
                **estimate,
            }
        )
    return found
