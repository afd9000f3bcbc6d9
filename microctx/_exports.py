"""The names `microctx.api` exports, written once: `microctx.api.__all__`, and the package
`__init__` loads each of them lazily from `microctx.api` (importing this module imports nothing)."""

API = (
    "freeze",
    "verify",
    "grade",
    "load_corpus",
    "load_answers",
    "load_submission",
    "Corpus",
    "Frozen",
    "Grade",
    "GradeResult",
    "Verification",
)
