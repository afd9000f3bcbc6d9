"""`microctx study ...`: the semantic layer's commands (registered by microctx.cli through `add_parsers`)."""

from __future__ import annotations

import csv
import io
import sys

from microctx.errors import InputError

EXIT_OK = 0


def _csv_rows(path: str, required: tuple[str, ...]) -> list[tuple[int, dict]]:
    from microctx._io.jsonio import read_bytes

    reader = csv.DictReader(io.StringIO(read_bytes(path).decode()))
    if reader.fieldnames is None or list(reader.fieldnames[: len(required)]) != list(required):
        raise InputError(path, f"expected the CSV header {','.join(required)}", field="header")
    return list(enumerate(reader, 2))


def _write_csv(rows: list[dict], columns: list[str], out=None) -> None:
    """`columns` of `rows` as CSV through the one writer (`_io.csvout`): an annotator's note, a name
    or a label that a spreadsheet would run as a formula is written as text."""
    from microctx._io.csvout import csv_bytes

    (out or sys.stdout).write(csv_bytes(columns, ([row.get(c) for c in columns] for row in rows)).decode())


def cmd_init(args) -> int:
    from microctx.semantic.items import init_folder

    names = [x.strip() for x in args.annotators.split(",")] if args.annotators else None
    folder = init_folder(args.study, args.public, args.answers, args.out, names)
    counts = {a: len(v) for a, v in folder.document["assignments"].items()}
    print(
        f"study {folder.document['study']}: {len(folder.items)} items in {args.out}; assigned "
        + ", ".join(f"{a} {n}" for a, n in counts.items())
    )
    return EXIT_OK


def cmd_items(args) -> int:
    from microctx.semantic.items import StudyFolder

    folder = StudyFolder(args.dir)
    names = folder.assigned(args.annotator) if args.annotator else sorted(folder.items)
    _write_csv(
        [{**folder.items[n], "labels": "|".join(folder.items[n]["labels"])} for n in names],
        ["item", "record_id", "question", "labels"],
    )
    return EXIT_OK


def cmd_annotate(args) -> int:
    from microctx.semantic import events as ev
    from microctx.semantic.imports import _label_event
    from microctx.semantic.items import StudyFolder

    folder = StudyFolder(args.dir)
    folder.assigned(args.annotator)
    found = [
        _label_event(
            folder, row["item"], args.annotator, row["label"] or None, {}, (args.source, n, "label"), row.get("note") or ""
        )
        for n, row in _csv_rows(args.source, ("item", "label"))
    ]
    ev.append(folder.events_path, found)
    print(f"{len(found)} labels by {args.annotator} appended to {folder.events_path}")
    return EXIT_OK


def cmd_import(args) -> int:
    from microctx.semantic.imports import import_labels

    users = dict(pair.split("=", 1) for pair in args.user or [])
    count = import_labels(args.dir, args.format, args.source, users)
    print(f"{count} labels imported from {args.source} ({args.format})")
    return EXIT_OK


def cmd_queue(args) -> int:
    from microctx.semantic.items import StudyFolder
    from microctx.semantic.labels import queue_rows

    _write_csv(queue_rows(StudyFolder(args.dir), names=args.names), ["item", "record_id", "question", "given", "notes"])
    return EXIT_OK


def cmd_adjudicate(args) -> int:
    from microctx.semantic import events as ev
    from microctx.semantic.items import StudyFolder

    folder = StudyFolder(args.dir)
    found = []
    for n, row in _csv_rows(args.source, ("item", "label", "reason")):
        item = folder.item(row["item"], args.source, n)
        if row["label"] not in item["labels"]:
            raise InputError(args.source, f"label {row['label']!r} is not one of {item['labels']}", record=n, field="label")
        if not (row["reason"] or "").strip():
            raise InputError(args.source, "an adjudication needs a reason", record=n, field="reason")
        found.append(
            {
                "annotator": args.adjudicator,
                "item": item["item"],
                "kind": "adjudicate",
                "label": row["label"],
                "reason": row["reason"],
                "guideline_version": folder.guideline_version,
            }
        )
    ev.append(folder.events_path, found)
    print(f"{len(found)} adjudications appended to {folder.events_path}")
    return EXIT_OK


def cmd_agreement(args) -> int:
    from microctx._io.atomic import atomic_write
    from microctx.semantic.agreement import AGREEMENT_COLUMNS
    from microctx.semantic.figures import study_agreement
    from microctx.semantic.freeze import quality_rows
    from microctx.semantic.items import StudyFolder
    from microctx.semantic.labels import annotator_labels

    folder = StudyFolder(args.dir)
    labels = annotator_labels(folder)
    rows = study_agreement(folder, labels, n_boot=args.n_boot, seed=args.seed)
    buffer = io.StringIO()
    _write_csv(
        [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()} for r in rows], list(AGREEMENT_COLUMNS), buffer
    )
    atomic_write(args.output, buffer.getvalue().encode())
    for r in (r for r in rows if r["slice_kind"] == "overall"):
        print(
            f"{r['question']}: {r['measure']} {r['value']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] "
            f"({r['items']} items, {r['components']} components, n_eff {r['n_eff']:.1f})"
        )
    for q in quality_rows(folder, labels):
        flag = "  FLAGGED: careless?" if q["flagged"] else ""
        print(
            f"{q['question']}: {q['annotator']} Dawid-Skene accuracy {q['accuracy']:.3f}, kappa vs consensus {q['kappa']:.3f}{flag}"
        )
    return EXIT_OK


def cmd_freeze(args) -> int:
    from microctx.semantic.freeze import write_semantic

    document = write_semantic(args.dir, args.out, n_boot=args.n_boot, seed=args.seed)
    print(f"froze {len(document['gold'])} adjudicated labels into {args.out} (events {document['events_sha256'][:12]}…)")
    for r in document["lexical"]:
        print(
            f"{r['question']}: {r['rule']} {r['measure']} {r['value']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] "
            f"({r['items']} items, {r['components']} components)"
        )
    for j in document["judge"]:
        print(f"{j['annotator']}: {'used' if j['used'] else 'not used'}" + (f" ({j['reason']})" if not j["used"] else ""))
    return EXIT_OK


def cmd_judge(args) -> int:
    from microctx.semantic.judge import run_judge

    s = run_judge(args.dir, args.base_url, args.model, api_key_env=args.api_key_env, timeout=args.timeout)
    print(
        f"judge {s['model']}: {s['items']} items ({s['unusable']} unusable answers); the record-mode proxy counted "
        f"{s['calls']} calls, {s['input_tokens']} input and {s['output_tokens']} output tokens"
    )
    return EXIT_OK


def add_parsers(sub, parser_class=None) -> None:
    """Register `microctx study` and its subcommands on the main parser's subparsers."""
    study = sub.add_parser("study", help="a semantic study: annotate, measure agreement, adjudicate, freeze semantic.json")
    kinds = study.add_subparsers(dest="study_command", required=True, metavar="STEP")
    p = kinds.add_parser("init", help="make a study folder (public text only) from STUDY.toml")
    p.add_argument("study", metavar="STUDY.toml")
    p.add_argument("--public", required=True)
    p.add_argument("--answers", required=True)
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--annotators", help="a,b,c: replaces the study file's annotators")
    p.set_defaults(func=cmd_init)
    p = kinds.add_parser("items", help="CSV of items (item,record_id,question,labels) on stdout")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--annotator", help="only this annotator's assignments")
    p.set_defaults(func=cmd_items)
    p = kinds.add_parser("annotate", help="append an annotator's labels from a CSV (item,label[,note])")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--annotator", required=True)
    p.add_argument("--from", dest="source", required=True, metavar="FILE.csv")
    p.set_defaults(func=cmd_annotate)
    p = kinds.add_parser("import", help="append labels from a Label Studio, Prodigy, Argilla or CSV export")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--format", required=True, choices=["label-studio", "prodigy", "argilla", "csv"])
    p.add_argument("--from", dest="source", required=True, metavar="FILE")
    p.add_argument("--user", action="append", metavar="ID=NAME", help="map a tool's user id to an annotator")
    p.set_defaults(func=cmd_import)
    p = kinds.add_parser("queue", help="CSV of the disagreements to adjudicate on stdout")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--names", action="store_true", help="show who gave which label (hidden by default)")
    p.set_defaults(func=cmd_queue)
    p = kinds.add_parser("adjudicate", help="append decisions from a CSV (item,label,reason)")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--from", dest="source", required=True, metavar="FILE.csv")
    p.add_argument("--adjudicator", default="adjudicator")
    p.set_defaults(func=cmd_adjudicate)
    for name, func, out, what in (
        ("agreement", cmd_agreement, "--output", "agreement per question, slice and measure (CSV)"),
        ("freeze", cmd_freeze, "--out", "write semantic.json (exit 2: refused while incomplete)"),
    ):
        p = kinds.add_parser(name, help=what)
        p.add_argument("dir", metavar="DIR")
        p.add_argument(out, dest="output" if out == "--output" else "out", required=True, metavar="FILE")
        p.add_argument("--n-boot", type=int, default=10_000, help="bootstrap replicates (default 10000)")
        p.add_argument("--seed", type=int, default=0)
        p.set_defaults(func=func)
    p = kinds.add_parser("judge", help="a model behind an OpenAI-compatible endpoint labels every item (record mode)")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True)
    p.add_argument("--api-key-env", help="name of the variable holding the API key (never the key itself)")
    p.add_argument("--timeout", type=float, default=60.0)
    p.set_defaults(func=cmd_judge)
