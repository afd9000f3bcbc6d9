"""A nosy candidate: looks everywhere it can reach for the answer bundle, and reports what it found.

It searches its arguments, its environment (names and values), sys.path, its working directory
and every parent of it, and the folder of every path it was given (arguments, environment
values, sys.path) and that folder's parents; in each folder it lists the files and flags one
named like the answers file or whose SHA-256 is the answers' digest (both are public facts).
It writes a valid, empty submission carrying a `snoop` report, so the runner accepts the run.
Usable as a function candidate (`snoop.py:run`) or a command (`python snoop.py PUBLIC SUBMISSION [DEVKIT]`).
"""

import hashlib
import json
import os
import sys
from pathlib import Path

ANSWERS_NAME = "s8f-github-issues-answers-2026-08-09.json"
ANSWERS_SHA256 = "af827ddca1063c602153f80b14523bda8d07e1a7e909a5c487616f2702eda05d"
ANSWERS_SIZE = 305282


def _folders_of(path_text):
    path = Path(path_text)
    if not path.is_absolute():
        path = Path.cwd() / path
    path = path.resolve()
    start = path if path.is_dir() else path.parent
    return [start, *start.parents]


def _looks_like_path(text):
    return os.sep in text or os.path.exists(text)


def search(arguments):
    """(findings, folders listed) for the given arguments and this process's environment."""
    findings = []
    texts = list(arguments) + list(sys.argv)
    for key, value in os.environ.items():
        if "answers" in key.lower() or "answers" in value.lower() or ANSWERS_SHA256 in value or key == "MICROCTX_DATA_DIR":
            findings.append(f"environment variable {key}={value}")
        texts += value.split(os.pathsep)
    for text in texts:
        if ANSWERS_NAME in text or ANSWERS_SHA256 in text:
            findings.append(f"text names the answers: {text}")
    folders = set(_folders_of(os.getcwd()))
    for text in texts + sys.path:
        if text and _looks_like_path(text):
            folders.update(_folders_of(text))
    for folder in sorted(folders):
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            try:
                if not entry.is_file():
                    continue
                if entry.name == ANSWERS_NAME:
                    findings.append(f"file named like the answers: {entry}")
                elif entry.stat().st_size == ANSWERS_SIZE and hashlib.sha256(entry.read_bytes()).hexdigest() == ANSWERS_SHA256:
                    findings.append(f"file with the answers' digest: {entry}")
            except OSError:
                continue
    return findings, [str(f) for f in sorted(folders)]


def run(public_path, output_path, *, devkit_path=None, params=None):
    findings, folders = search([public_path, output_path] + ([devkit_path] if devkit_path else []))
    devkit_splits, devkit_ids = [], []
    if devkit_path:
        devkit = json.loads(Path(devkit_path).read_text())
        devkit_splits = sorted({a["split"] for a in devkit["answers"]})
        devkit_ids = [a["id"] for a in devkit["answers"]]
    corpus = Path(public_path).read_bytes()
    submission = {
        "schema": "fak-microcontext-submission/1",
        "corpus_sha256": hashlib.sha256(corpus).hexdigest(),
        "answers": [],
        "aggregates": None,
        "snoop": {
            "findings": findings,
            "folders": folders,
            "devkit_splits": devkit_splits,
            "devkit_ids": devkit_ids,
            "cwd": os.getcwd(),
            "environment": sorted(os.environ),
        },
    }
    Path(output_path).write_text(json.dumps(submission))
    return {"tool_calls": len(folders)}


if __name__ == "__main__":  # the command protocol: counters go to counters.json in the working directory
    counters = run(sys.argv[1], sys.argv[2], devkit_path=sys.argv[3] if len(sys.argv) > 3 else None)
    Path("counters.json").write_text(json.dumps({**counters, "version": "snoop-cmd"}))
