"""`microctx run` (a candidate in the sandbox) and `microctx devkit`."""

from __future__ import annotations

from microctx.cli.common import EXIT_FAIL, EXIT_OK, _check_paths, _say
from microctx.errors import InputError
from microctx.options import seconds


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
    options["gateway"] = _gateway_settings(args)
    return SandboxSettings(**options)


def _project_run(args):
    """(name, cmd, settings, pass_env, timeout, project) of `run`: a candidate.toml, --code/--venv/--data, or neither."""
    import dataclasses
    from pathlib import Path

    from microctx.candidates.project import load_candidate_file, make_project

    settings, pass_env = _sandbox_settings(args), list(args.pass_env or ())
    if args.candidate.endswith(".toml") and Path(args.candidate).is_file():
        if args.cmd is not None or args.code or args.venv or args.data:
            raise InputError(
                "--cmd", "a candidate file holds the command and folders: no --cmd, --code, --venv or --data beside it"
            )
        found = load_candidate_file(args.candidate)
        chosen = {k: v for k, v in found.settings.items() if k not in ("network", "allow_hosts") or args.network == "none"}
        try:
            settings = dataclasses.replace(settings, **chosen)
        except InputError as exc:
            raise InputError(args.candidate, exc.message, field=f"candidate.{str(exc.file).lstrip('-')}") from None
        timeout = args.timeout if args.timeout is not None else found.timeout
        return found.name, found.command, settings, [*pass_env, *found.pass_env], timeout, found.project
    if not (args.code or args.venv or args.data):
        return args.candidate, args.cmd, settings, pass_env, args.timeout, None
    if args.cmd is None:
        raise InputError("--code", "--code, --venv and --data go with --cmd (or use a candidate.toml)")
    return args.candidate, args.cmd, settings, pass_env, args.timeout, make_project(args.code or (), args.data or (), args.venv)


def _gateway_settings(args):
    """The model gateway's settings from `--model-endpoint` and its companions (None without it)."""
    from microctx.candidates.settings import GatewaySettings, parse_price

    companions = (args.model_key_env, args.max_model_calls, args.max_tokens, args.max_dollars, args.model_price, args.model_cache)
    if args.model_endpoint is None:
        if any(value is not None for value in companions):
            raise InputError(
                "--model-endpoint", "the model options (--model-key-env, --max-*, --model-price) need --model-endpoint"
            )
        return None
    price_in, price_out, price_cached = parse_price(args.model_price) if args.model_price else (0.0, 0.0, None)
    return GatewaySettings(
        endpoint=args.model_endpoint,
        key_env=args.model_key_env,
        max_calls=args.max_model_calls,
        max_tokens=args.max_tokens,
        max_dollars=args.max_dollars,
        price_in=price_in,
        price_out=price_out,
        price_cached=price_cached,
        cache=args.model_cache,
    )


def _sandbox_parsers(p) -> None:
    """`run`'s isolation, network, limits, cache and passed variables."""
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


def _gateway_parsers(p) -> None:
    p.add_argument(
        "--model-endpoint",
        metavar="URL",
        help="serve a model gateway at http://model.gateway/v1 inside the sandbox, forwarding to this "
        "OpenAI-compatible endpoint; every call is counted by the runner, direct connections are refused",
    )
    p.add_argument(
        "--model-key-env",
        metavar="NAME",
        help="the variable holding the endpoint's key: the gateway adds it, the candidate never sees it",
    )
    p.add_argument("--max-model-calls", type=int, metavar="N", help="gateway budget: model calls (past it the run fails)")
    p.add_argument("--max-tokens", type=int, metavar="N", help="gateway budget: input + output tokens")
    p.add_argument("--max-dollars", type=float, metavar="X", help="gateway budget: dollars at --model-price")
    p.add_argument("--model-price", metavar="IN:OUT[:CACHED]", help="dollars per million tokens (input, output, cached input)")
    p.add_argument(
        "--model-cache", metavar="DIR", help="the gateway's response cache (the runner's folder, never the candidate's)"
    )


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
    name, cmd, settings, pass_env, timeout, project = _project_run(args)
    manifest = run_candidate(
        name,
        args.public,
        args.submission,
        devkit=args.devkit,
        params=_parse_params(args.param),
        timeout=timeout,
        cmd=cmd,
        sandbox=settings,
        pass_env=pass_env,
        project=project,
    )
    counters = ", ".join(f"{k} {v}" for k, v in manifest["counters"].items() if v is not None) or "no counters reported"
    cost = (
        f"{manifest['isolation']}; {manifest['wall_seconds']:.2f} s wall, {manifest['cpu_seconds']:.2f} s CPU, "
        f"{manifest['peak_memory_bytes'] / 2**20:.0f} MiB peak; {counters}"
    )
    if manifest["network"]["mode"] == "record":
        cost += f"; {len(manifest['network']['requests'])} network requests, {len(manifest['network']['denied'])} denied"
    if not manifest["ok"]:
        from microctx.candidates.run_files import escape_controls

        _say(
            f"microctx run: FAILED run of {escape_controls(manifest['candidate'])}: {escape_controls(manifest['error'])} "
            f"(manifest {manifest_path(args.submission)}; no submission written)"
        )
        return EXIT_FAIL
    from microctx.candidates.run_files import escape_controls

    print(f"ran {escape_controls(manifest['candidate'])}: wrote {args.submission} and {manifest_path(args.submission)} ({cost})")
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


def _builtin_names() -> str:
    from microctx.candidates.registry import BUILTINS

    return "; ".join(f"{name}: {b.description}" for name, b in BUILTINS.items())


def _candidate_parsers(sub, describe: bool = True) -> None:
    """`run` and `devkit`; `describe=False` leaves the built-in list out of `run`'s description (it
    imports the candidate registry, which a command other than `run` never shows)."""
    names = _builtin_names() if describe else "see `microctx run --help`"
    p = sub.add_parser(
        "run",
        help="run a candidate in isolation on a public corpus; writes S and <S>.run.json",
        description=f"Built-in candidates: {names}. Exit 0 a valid submission, 1 a failed run "
        "(crash, timeout, invalid submission; the manifest says why), 2 unusable input.",
    )
    p.add_argument(
        "candidate",
        metavar="NAME",
        help="built-in name, module:function, file.py:function, a label with --cmd, or a candidate.toml (a project)",
    )
    p.add_argument("--public", required=True, help="public corpus (the only data the candidate gets)")
    p.add_argument("--submission", required=True, help="submission to write; the run manifest goes beside it")
    p.add_argument("--devkit", help="train/tune answers for tuning (from `microctx devkit`); test answers are refused")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="candidate parameter (repeatable; JSON values)")
    p.add_argument("--timeout", type=seconds, metavar="SECONDS", help="kill the candidate after this many seconds (default 3600)")
    p.add_argument(
        "--cmd", metavar="TEMPLATE", help="run a command instead: placeholders {public} {submission} {devkit} {params} {python}"
    )
    _sandbox_parsers(p)
    _gateway_parsers(p)
    p.add_argument(
        "--code", action="append", metavar="DIR", help="a folder of the candidate's code, read-only (repeatable; with --cmd)"
    )
    p.add_argument("--venv", metavar="DIR", help="the candidate's virtual environment, read-only: {python} and PATH use it")
    p.add_argument("--data", action="append", metavar="DIR", help="a read-only data folder of the candidate's (repeatable)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("devkit", help="write an answer file for tuning: the train/tune answers only, never test")
    p.add_argument("--answers", required=True, help="answer bundle")
    p.add_argument("--splits", default="train,tune", help="comma-separated, from train and tune (default both)")
    p.add_argument("--output", required=True, help="devkit to write")
    p.add_argument("--public", help="public corpus, to recompute the top-10 id lists over the devkit's records")
    p.set_defaults(func=cmd_devkit)
