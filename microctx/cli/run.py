"""`microctx run` (a candidate in the sandbox) and `microctx devkit`."""

from __future__ import annotations

from microctx.cli.common import EXIT_FAIL, EXIT_OK, _check_paths, _say, _seconds
from microctx.errors import InputError


def _parse_params(pairs: list[str]) -> dict:
    """`KEY=VALUE` pairs; a value that parses as JSON (1, 0.5, true, "x") is taken as such, else as text."""
    import orjson

    params = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError("--param", f"expected KEY=VALUE, got {pair!r}")
        try:
            params[key] = orjson.loads(value)
        except orjson.JSONDecodeError:
            params[key] = value
    return params


def _sandbox_settings(args):
    """The run's SandboxSettings from `microctx run`'s options (sandboxed candidates issue)."""
    from microctx.candidates.sandbox import SandboxSettings, parse_size

    options: dict = {"isolation": args.isolation, "network": args.network, "allow_hosts": tuple(args.allow_host or ())}
    if args.memory is not None:
        options["memory_bytes"] = parse_size(args.memory)
    if args.max_processes is not None:
        options["max_processes"] = args.max_processes
    if args.cpu_seconds is not None:
        options["cpu_seconds"] = args.cpu_seconds
    if args.cache_dir is not None:
        options["cache_dir"] = args.cache_dir
    return SandboxSettings(**options)


def cmd_run(args) -> int:
    from microctx.candidates.runner import manifest_path, run_candidate

    _check_paths(
        {"--public": args.public, "--devkit": args.devkit},
        {"--submission": args.submission, "the run manifest": manifest_path(args.submission)},
    )
    if args.cmd is not None:
        import shlex

        try:
            shlex.split(args.cmd)
        except ValueError as exc:
            raise InputError("--cmd", f"cannot split the command into words: {exc}") from None
    manifest = run_candidate(
        args.candidate,
        args.public,
        args.submission,
        devkit=args.devkit,
        params=_parse_params(args.param),
        timeout=args.timeout,
        cmd=args.cmd,
        sandbox=_sandbox_settings(args),
        pass_env=args.pass_env or (),
    )
    counters = ", ".join(f"{k} {v}" for k, v in manifest["counters"].items() if v is not None) or "no counters reported"
    cost = (
        f"{manifest['isolation']}; {manifest['wall_seconds']:.2f} s wall, {manifest['cpu_seconds']:.2f} s CPU, "
        f"{manifest['peak_memory_bytes'] / 2**20:.0f} MiB peak; {counters}"
    )
    if manifest["network"]["mode"] == "record":
        cost += f"; {len(manifest['network']['requests'])} network requests, {len(manifest['network']['denied'])} denied"
    if not manifest["ok"]:
        _say(
            f"microctx run: FAILED run of {manifest['candidate']}: {manifest['error']} "
            f"(manifest {manifest_path(args.submission)}; no submission written)"
        )
        return EXIT_FAIL
    print(f"ran {manifest['candidate']}: wrote {args.submission} and {manifest_path(args.submission)} ({cost})")
    return EXIT_OK


def cmd_devkit(args) -> int:
    from microctx._io.atomic import atomic_write
    from microctx.candidates.devkit import make_devkit
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers

    _check_paths({"--answers": args.answers, "--public": args.public}, {"--output": args.output})
    corpus = None
    if args.public:
        from microctx.corpus.public import load_corpus

        corpus = load_corpus(args.public)
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    devkit = make_devkit(load_answers(args.answers), splits, corpus=corpus)
    atomic_write(args.output, dumps(devkit))
    print(
        f"wrote {args.output}: {len(devkit['answers'])} answers of {', '.join(devkit['devkit']['splits'])} "
        f"(no test answers); {devkit['devkit']['aggregates']}"
    )
    return EXIT_OK


def _candidate_parsers(sub) -> None:
    from microctx.candidates.registry import BUILTINS

    names = "; ".join(f"{name}: {b.description}" for name, b in BUILTINS.items())
    p = sub.add_parser(
        "run",
        help="run a candidate in isolation on a public corpus; writes S and <S>.run.json",
        description=f"Built-in candidates: {names}. Exit 0 a valid submission, 1 a failed run "
        "(crash, timeout, invalid submission; the manifest says why), 2 unusable input.",
    )
    p.add_argument("candidate", metavar="NAME", help="built-in name, module:function, file.py:function, or a label with --cmd")
    p.add_argument("--public", required=True, help="public corpus (the only data the candidate gets)")
    p.add_argument("--submission", required=True, help="submission to write; the run manifest goes beside it")
    p.add_argument("--devkit", help="train/tune answers for tuning (from `microctx devkit`); test answers are refused")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="candidate parameter (repeatable; JSON values)")
    p.add_argument(
        "--timeout", type=_seconds, metavar="SECONDS", help="kill the candidate after this many seconds (default 3600)"
    )
    p.add_argument(
        "--cmd", metavar="TEMPLATE", help="run a command instead: placeholders {public} {submission} {devkit} {params} {python}"
    )
    # sandboxed candidates issue: isolation, network and limits
    p.add_argument(
        "--isolation",
        choices=["sandbox", "process"],
        default="sandbox",
        help="sandbox (default; bubblewrap namespaces, see README) or process (no sandbox: choose it knowingly)",
    )
    p.add_argument(
        "--network",
        choices=["none", "record"],
        default="none",
        help="none (default): no network; record: only --allow-host targets, through the runner's logging proxy",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        metavar="HOST[:PORT]",
        help="with --network record: a host the candidate may reach (HOST alone: ports 80 and 443; repeatable)",
    )
    p.add_argument("--memory", metavar="SIZE", help="memory limit of the whole run, e.g. 2G or 512M (default 4G)")
    p.add_argument("--max-processes", type=int, metavar="N", help="processes and threads at once (default 512)")
    p.add_argument("--cpu-seconds", type=int, metavar="SECONDS", help="CPU-time limit of each process (default 3600)")
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="a folder the candidate keeps between runs, read-write (e.g. the llm candidate's response "
        "cache); it must not hold an answer bundle or the data folder",
    )
    p.add_argument(
        "--pass-env",
        action="append",
        metavar="NAME",
        help="pass this environment variable (an API key) to the candidate; the manifest names it, never its value (repeatable)",
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("devkit", help="write an answer file for tuning: the train/tune answers only, never test")
    p.add_argument("--answers", required=True, help="answer bundle")
    p.add_argument("--splits", default="train,tune", help="comma-separated, from train and tune (default both)")
    p.add_argument("--output", required=True, help="devkit to write")
    p.add_argument("--public", help="public corpus, to recompute the top-10 id lists over the devkit's records")
    p.set_defaults(func=cmd_devkit)
