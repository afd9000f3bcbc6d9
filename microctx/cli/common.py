"""What every command shares: exit codes, the one-line error, the argument parser, numbers, paths, the held-out look."""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2


EXIT_INTERNAL = 70  # a bug in microctx (EX_SOFTWARE): one line, the traceback with MICROCTX_DEBUG=1


def _say(message: str) -> None:
    """One line on stderr, whatever the message holds (a file name or a parser's message with a
    newline in it would otherwise break the one-line promise), with the environment's secrets
    and the secrets in URLs hidden (`scrub_message`: a key given where its name belongs, a URL
    with a password in it)."""
    from microctx.errors import scrub_message

    print(" ".join(scrub_message(str(message)).split()), file=sys.stderr)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what is wrong and where to look), exit 2."""

    def error(self, message: str):
        _say(f"{self.prog}: {message} (see `{self.prog} -h`)")
        sys.exit(EXIT_INPUT)


def _check_paths(inputs: dict, outputs: dict | None = None, folders: dict | None = None) -> None:
    from microctx._io.paths import check_paths

    check_paths(inputs, outputs or {}, folders)


def _held_out_look(answers: str, grade: dict, via: str, submission: str, *, digests: tuple[str, str], manifest, marked) -> str:
    """Append a look at the test answers to the held-out ledger (before any grade is written); its
    line. `digests`: the SHA-256 of the answers' and the submission's bytes as they were read and
    graded (a file is not hashed again by name: `-` cannot be read twice, and a file changed
    since is not the one graded); `manifest`: the submission's run manifest (`read_manifest`
    with the submission's digest) or None."""
    from microctx.grading.ledger import looks_line, record_grade

    answers_sha256, submission_sha256 = digests
    return looks_line(
        record_grade(
            answers,
            grade,
            via=via,
            submission_path=submission,
            manifest=manifest,
            marked=marked,
            answers_sha256=answers_sha256,
            submission_sha256=submission_sha256,
        )
    )


# The input files commands share, one wording each (what `microctx COMMAND -h` says of them)
INPUTS = {
    "--public": "public corpus",
    "--answers": "answer bundle (a grade on test is recorded in the held-out ledger)",
    "--submission": "submission to grade",
}


def add_inputs(p, *options: str, required: bool = True, s8f: bool = False) -> None:
    """Add the shared input options (INPUTS): required, or optional, or with `s8f` filled in from
    the published s8f when left out (`_s8f_default`)."""
    for option in options:
        p.add_argument(option, required=required and not s8f, help=INPUTS[option] + (" (default: s8f)" if s8f else ""))


def _semantic_layer(args, answers: dict, submission: dict) -> tuple[bytes, str] | None:
    """`--semantic` (docs/semantic.md) of `grade` and `slices`: the layer to write beside the output, or None.
    microctx.semantic (and numpy under it) is imported only when the option is given."""
    if not getattr(args, "semantic", None):
        return None
    from microctx.semantic.grade import layer_for

    return layer_for(args.semantic, args.answers, answers, submission)


def _semantic_paths(args) -> tuple[dict, dict]:
    """`--semantic`'s input and the table it writes beside --output, for `_check_paths` (none without it)."""
    if not getattr(args, "semantic", None):
        return {}, {}
    from microctx.semantic.grade import semantic_path

    return {"--semantic": args.semantic}, {"the semantic table": semantic_path(args.output)}


def _stage_semantic(layer: tuple[bytes, str] | None, output: str, into) -> str | None:
    """Stage the semantic layer's table beside `output` into the command's set `into` (see
    `microctx.semantic.grade.stage_beside`); its summary line, printed once the set is published."""
    if layer is None:
        return None
    from microctx.semantic.grade import stage_beside

    return stage_beside(layer, output, into)


def _stats_options(p) -> None:
    """The statistics options shared by `slices` and `report grade|compare`."""
    p.add_argument("--seed", type=int, default=None, metavar="N", help="bootstrap seed (default 0)")
    p.add_argument("--n-boot", type=int, default=None, metavar="N", help="bootstrap resamples (default 10000)")
    p.add_argument(
        "--min-support", type=int, default=None, metavar="N", help="gold facts a slice needs to be judged (default 20)"
    )
    p.add_argument(
        "--min-components",
        type=int,
        default=None,
        metavar="N",
        help="split components a slice needs for an interval (default 10)",
    )


def _stats_kw(args) -> dict:
    """The statistics options given on the command line, defaults filled in from the package."""
    from microctx.grading import stats

    chosen = {"seed": args.seed, "n_boot": args.n_boot, "min_support": args.min_support, "min_components": args.min_components}
    defaults = {
        "seed": stats.DEFAULT_SEED,
        "n_boot": stats.DEFAULT_N_BOOT,
        "min_support": stats.DEFAULT_MIN_SUPPORT,
        "min_components": stats.DEFAULT_MIN_COMPONENTS,
    }
    ranges = {"seed": (0, 2**32 - 1), "n_boot": (1, 1_000_000)}  # the rest are checked where they are used
    for key, value in chosen.items():
        low, high = ranges.get(key, (None, None))
        if value is not None and low is not None and not low <= value <= high:
            from microctx.errors import InputError

            raise InputError("--" + key.replace("_", "-"), f"expected a whole number from {low} to {high}, got {value}")
    return {k: defaults[k] if v is None else v for k, v in chosen.items()}


def _s8f_default(args) -> None:
    """Fill --public/--answers left out from the data layer (the s8f corpus)."""
    if not args.public or (hasattr(args, "answers") and not args.answers):
        from microctx.corpus import snapshot as data

        paths = data.s8f()
        args.public = args.public or str(paths.public)
        if hasattr(args, "answers"):
            args.answers = args.answers or str(paths.answers)


def _report_done(manifest: dict, out: str) -> int:
    print(
        f"{manifest['kind']} report -> {out}/{manifest['notebook'].replace('.ipynb', '.html')} "
        f"({len(manifest['charts'])} charts, {manifest['seconds']:.1f} s)"
    )
    return EXIT_OK
