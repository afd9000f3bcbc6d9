"""Signed receipts: every released score comes with one, checkable offline with the public key.

A receipt is `{"schema": RECEIPT_SCHEMA, "payload": {...}, "signature": BASE64, "key": BASE64}`:
the payload names the corpus, answers and submission digests, the metric, the part of the test
records scored, the released value, the team, the time and the Ladder's decision; the
signature is Ed25519 (the `cryptography` package) over the payload's canonical JSON
(`microctx.contract.canonical.dumps`), so a change of any byte of the payload, or of the
signature, fails verification. `key` is the signer's public key, for reading only: verification
uses the key the verifier was given (`microctx serve admin public-key`), never this one.
"""

from __future__ import annotations

import base64
import binascii
import os

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from microctx._io.jsonio import parse_json, read_bytes
from microctx.contract.canonical import dumps
from microctx.errors import InputError

RECEIPT_SCHEMA = "microctx-receipt/1"
PAYLOAD_FIELDS = (
    "corpus_sha256",
    "answers_sha256",
    "submission_sha256",
    "submission_id",
    "team",
    "metric",
    "part",
    "released",
    "decision",
    "at",
)


def new_private_key() -> str:
    """A new Ed25519 private key, PEM (PKCS#8, unencrypted: it lives in the service state)."""
    key = Ed25519PrivateKey.generate()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()


def _private(pem: str) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("the service key is not an Ed25519 key")
    return key


def public_key_line(private_pem: str) -> str:
    """The public key as one line: base64 of its 32 raw bytes."""
    raw = _private(private_pem).public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def sign(payload: dict, private_pem: str) -> dict:
    """The receipt of `payload` (which must hold exactly PAYLOAD_FIELDS)."""
    if set(payload) != set(PAYLOAD_FIELDS):
        raise ValueError(f"a receipt payload holds exactly {PAYLOAD_FIELDS}")
    ordered = {key: payload[key] for key in PAYLOAD_FIELDS}
    signature = _private(private_pem).sign(dumps(ordered))
    return {
        "schema": RECEIPT_SCHEMA,
        "payload": ordered,
        "signature": base64.b64encode(signature).decode(),
        "key": public_key_line(private_pem),
    }


def load_public_key(path: str | os.PathLike) -> Ed25519PublicKey:
    """A public key file: the one-line base64 of `serve admin public-key`, or a PEM public key."""
    text = read_bytes(path).decode("utf-8", "replace").strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
            if not isinstance(key, Ed25519PublicKey):
                raise ValueError("not an Ed25519 public key")
            return key
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(text, validate=True))
    except (ValueError, binascii.Error, TypeError) as exc:
        raise InputError(path, f"not an Ed25519 public key (base64 of 32 bytes, or PEM): {exc}") from None


def load_receipt(path: str | os.PathLike) -> dict:
    """A receipt file's document, checked for shape (not for its signature)."""
    document = parse_json(read_bytes(path), path)
    if not isinstance(document, dict) or document.get("schema") != RECEIPT_SCHEMA:
        raise InputError(path, f"expected a receipt (schema {RECEIPT_SCHEMA!r})", field="schema")
    if not isinstance(document.get("payload"), dict):
        raise InputError(path, "expected an object", field="payload")
    if not isinstance(document.get("signature"), str):
        raise InputError(path, "expected a base64 string", field="signature")
    return document


def is_valid(receipt: dict, key: Ed25519PublicKey) -> bool:
    """Whether the receipt's signature is the key's over its payload's canonical JSON."""
    payload = receipt.get("payload")
    if not isinstance(payload, dict) or list(payload) != list(PAYLOAD_FIELDS):
        return False
    try:
        signature = base64.b64decode(str(receipt.get("signature")), validate=True)
        key.verify(signature, dumps(payload))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True
