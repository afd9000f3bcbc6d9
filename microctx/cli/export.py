"""`microctx export`: a grade in the Every Eval Ever schema."""

from __future__ import annotations

from typing import Any

from microctx.cli.common import EXIT_OK, _check_paths, _say, _stats_kw, _stats_options


def cmd_export(args) -> int:
    from microctx._io.atomic import atomic_write
    from microctx.contract.canonical import dumps
    from microctx.grading.ledger import looks_line
    from microctx.reports import tables
    from microctx.reports.eee import eee_document

    _check_paths({"--public": args.public, "--answers": args.answers, "--submission": args.submission}, {"--output": args.output})
    kw = _stats_kw(args)
    inputs = tables.load_inputs(args.public, args.answers, [args.submission], [args.name] if args.name else ())
    (name,) = inputs.submissions
    corpus: Any = inputs.corpus
    graded = tables.grade_one(name, inputs, **kw)
    look = tables.record_report_look(inputs, name, graded.result, "export")  # a grade on test: one look
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


def register(sub) -> None:
    p = sub.add_parser(
        "export",
        help="grade a submission and write the result in the Every Eval Ever schema (a look at test)",
        description="Grade SUBMISSION on the test answers and write an Every Eval Ever document (schema 0.2.1): "
        "F1, precision, recall, exact-record rate and per-kind F1, each with its Korn-Graubard interval (cluster bootstrap over components), "
        "resamples and components; n_eff and the look count in its additional details.",
    )
    p.add_argument("--public", required=True)
    p.add_argument("--answers", required=True)
    p.add_argument("--submission", required=True)
    p.add_argument("--name", help="the candidate's name (default: the run manifest's, else the file name)")
    p.add_argument("--output", required=True, metavar="JSON")
    _stats_options(p)
    p.set_defaults(func=cmd_export)
