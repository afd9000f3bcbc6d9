"""Candidates that fail in the ways a real one can; each run must end as a failed run."""

import hashlib
import json
import time
from pathlib import Path


def _digest(public_path):
    return hashlib.sha256(Path(public_path).read_bytes()).hexdigest()


def crash(public_path, output_path, *, devkit_path=None, params=None):
    raise RuntimeError("planted crash")


def sleep(public_path, output_path, *, devkit_path=None, params=None):
    Path(output_path).write_text(json.dumps({"corpus_sha256": _digest(public_path), "answers": []}))
    time.sleep(float((params or {}).get("seconds", 60)))


def invalid_json(public_path, output_path, *, devkit_path=None, params=None):
    Path(output_path).write_text('{"corpus_sha256": "' + _digest(public_path) + '", "answers": [')


def wrong_shape(public_path, output_path, *, devkit_path=None, params=None):
    Path(output_path).write_text(json.dumps({"corpus_sha256": _digest(public_path), "answers": [{"id": 7}]}))


def wrong_corpus(public_path, output_path, *, devkit_path=None, params=None):
    Path(output_path).write_text(json.dumps({"corpus_sha256": "0" * 64, "answers": []}))


def no_output(public_path, output_path, *, devkit_path=None, params=None):
    return {"model_calls": 1}


def counted(public_path, output_path, *, devkit_path=None, params=None):
    """A valid empty submission; reports counters and echoes its parameters into the submission."""
    Path(output_path).write_text(json.dumps({"corpus_sha256": _digest(public_path), "answers": [], "params": params}))
    return {"model_calls": 3, "tool_calls": 2, "input_tokens": 1200, "output_tokens": 345}


counted.version = "counted-1"
