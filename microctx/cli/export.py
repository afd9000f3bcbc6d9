"""`microctx export`: a grade, a comparison or a sweep in the Every Eval Ever schema."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from microctx.cli.common import EXIT_OK, _check_paths, _say, _stats_kw, _stats_options
from microctx.errors import InputError


def cmd_export(args) -> int:
    from microctx.reports import tables

    if args.sweep:
        return _export_sweep(args)
    for option, value in (("--public", args.public), ("--answers", args.answers), ("--submission", args.submission)):
        if not value:
            raise InputError(option, "required to export a grade or a comparison (or give --sweep DIR)")
    submissions = list(args.submission)
    names = list(args.name or ())
    if len(submissions) == 1:
        return _export_grade(args, submissions[0], names)
    inputs_map = {f"--submission {i + 1}": s for i, s in enumerate(submissions)}
    _check_paths({"--public": args.public, "--answers": args.answers, **inputs_map}, folders={"--output": args.output})
    kw = _stats_kw(args)
    inputs = tables.load_inputs(args.public, args.answers, submissions, names)
    compared = tables.compare_outputs(inputs, via="export", **kw)  # a grade on test per candidate: one look each
    from microctx.reports.eee import compare_documents

    corpus: Any = inputs.corpus
    documents = compare_documents(compared, corpus_sha256=corpus.sha256, source=str(corpus.source), n_boot=kw["n_boot"])
    _write_documents(args.output, documents, "a comparison")
    for graded in compared.grades.values():
        if graded.look:
            from microctx.grading.ledger import looks_line

            _say(looks_line(graded.look))
    return EXIT_OK


def _export_grade(args, submission: str, names: list[str]) -> int:
    from microctx._io.atomic import atomic_write
    from microctx.contract.canonical import dumps
    from microctx.grading.ledger import looks_line, record_report_look
    from microctx.reports import tables
    from microctx.reports.eee import eee_document

    _check_paths({"--public": args.public, "--answers": args.answers, "--submission": submission}, {"--output": args.output})
    kw = _stats_kw(args)
    inputs = tables.load_inputs(args.public, args.answers, [submission], names)
    (name,) = inputs.submissions
    corpus: Any = inputs.corpus
    graded = tables.grade_one(name, inputs, **kw)
    look = record_report_look(inputs, name, graded.result, "export")  # a grade on test: one look
    document = eee_document(
        graded.result,
        graded.slices,
        candidate=look.get("candidate") or name,
        corpus_sha256=corpus.sha256,
        source=str(corpus.source),
        look=look,
        n_boot=kw["n_boot"],
    )
    atomic_write(args.output, dumps(document))
    print(
        f"wrote {args.output}: {len(document['evaluation_results'])} evaluation results (Every Eval Ever {document['schema_version']})"
    )
    _say(looks_line(look))
    return EXIT_OK


def _export_sweep(args) -> int:
    """Every configuration of a finished sweep folder, from its sweep.csv and selected.json (tune
    metrics only: no answers are read and no look is recorded)."""
    from microctx.contract.records import Selected, as_record
    from microctx.grading import ledger
    from microctx.reports.eee import sweep_documents

    if args.submission or args.answers:
        raise InputError("--sweep", "a sweep export reads the sweep folder only (no --answers, no --submission)")
    _check_paths({"--sweep": str(Path(args.sweep) / "sweep.csv")}, folders={"--output": args.output})
    from microctx.reports.tables import load_sweep

    loaded, selected = load_sweep(args.sweep)
    frame: Any = loaded
    missing = sorted({"key", "status", "tune_records", "selected"} - set(frame.columns))
    if missing:
        raise InputError(Path(args.sweep) / "sweep.csv", f"not a sweep table: no column {', '.join(missing)}")
    as_record(selected, Selected, Path(args.sweep) / "selected.json")
    digests = {str(d) for d in frame.get("config_digest", []) if isinstance(d, str) and d}
    looks = {d: sum(1 for e in ledger.entries(config=d) if e["marked"] is None) for d in digests}
    from microctx.tuning.write import read_result

    runs = Path(args.sweep) / "runs"  # a key is a SHA-256 (sweep.csv is input: nothing else names a folder)
    keys = [str(k) for k in frame["key"] if re.fullmatch(r"[0-9a-f]{64}", str(k))]
    kept = {key: (read_result(runs / key) or {}).get("metrics") or {} for key in keys}
    documents = sweep_documents(frame, selected, looks, kept)
    if not documents:
        raise InputError(Path(args.sweep) / "sweep.csv", "no configuration ran (status ok): nothing to export")
    _write_documents(args.output, documents, "a sweep")
    return EXIT_OK


def _write_documents(output: str, documents: dict[str, dict], what: str) -> None:
    """One `<name>.json` per document in the folder `output`, written as one set (all or none)."""
    from microctx._io.atomic import AtomicOutputs
    from microctx._io.paths import inside, safe_name_from
    from microctx.contract.canonical import dumps

    folder = Path(output)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise InputError(output, "--output must be a new or empty folder for a comparison or a sweep (one document each)")
    folder.mkdir(parents=True, exist_ok=True)
    with AtomicOutputs() as staged:
        for name, document in documents.items():
            staged.write(inside(folder, f"{safe_name_from(name)}.json"), dumps(document))
    version = next(iter(documents.values()))["schema_version"]
    print(f"wrote {output}: {len(documents)} documents of {what} (Every Eval Ever {version})")


def register(sub) -> None:
    p = sub.add_parser(
        "export",
        help="write a grade, a comparison or a sweep in the Every Eval Ever schema (a grade is a look at test)",
        description="One SUBMISSION: grade it on the test answers and write one Every Eval Ever document (schema 0.3.0) "
        "to --output: F1, precision, recall, exact-record rate and per-kind F1, each with its Korn-Graubard interval (cluster bootstrap over components) "
        "(method, resamples, components); n_eff and the look count in its additional details. Several --submission: "
        "a comparison, one document per candidate in the folder --output, each with its paired F1 difference to every "
        "other candidate (one look each). --sweep DIR: a finished sweep, one document per configuration in the folder "
        "--output, with its tune metrics (no answers read, no look).",
    )
    p.add_argument("--public")
    p.add_argument("--answers")
    p.add_argument("--submission", action="append", help="a submission (repeat for a comparison)")
    p.add_argument(
        "--name",
        action="append",
        help="the candidate's name, one per --submission (default: the run manifest's, else the file name)",
    )
    p.add_argument("--sweep", metavar="DIR", help="a finished sweep folder (sweep.csv, selected.json) instead of submissions")
    p.add_argument("--output", required=True, metavar="PATH", help="the document (one submission) or a folder of documents")
    _stats_options(p)
    p.set_defaults(func=cmd_export)
