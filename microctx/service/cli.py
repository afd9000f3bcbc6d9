"""The service's commands, registered into `microctx`'s parser by `register_service_commands`.

`microctx serve` (and `serve admin add-team|revoke|public-key|close`), `microctx submit`,
`microctx leaderboard`, `microctx receipt verify`. Exit codes as the rest of microctx: 0 done,
1 refused or invalid (a receipt that does not verify, a submission the server did not score),
2 unusable input.
"""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {value}")
    return value


def cmd_serve(args) -> int:
    from microctx.errors import InputError
    from microctx.service.server import build_service, run

    for option in ("answers", "public", "state"):
        if not getattr(args, option):
            raise InputError(f"--{option}", "missing: `microctx serve --answers A --public P --state URL --port N`")
    service = build_service(
        args.answers,
        args.public,
        args.state,
        daily_quota=args.daily_quota,
        total_quota=args.total_quota,
        ladder=args.ladder == "on",
    )
    run(service, args.host, args.port)
    return EXIT_OK


def cmd_admin(args) -> int:
    from microctx.service import state, tokens
    from microctx.service.db import open_state
    from microctx.service.receipts import public_key_line

    engine = open_state(args.state)
    if args.admin_command == "add-team":
        token = tokens.add_team(engine, args.name)
        print(f"team {args.name!r} added; its token is shown once (only its hash is stored):", file=sys.stderr)
        print(token)
    elif args.admin_command == "revoke":
        tokens.revoke_team(engine, args.name)
        print(f"team {args.name!r}: token revoked")
    elif args.admin_command == "public-key":
        print(public_key_line(state.ensure_competition(engine).signing_key))
    elif args.admin_command == "close":
        row = state.close(engine)
        print(f"competition closed at {row.closed_at}: the private board is released")
    return EXIT_OK


def cmd_submit(args) -> int:
    from microctx._io.atomic import AtomicOutputs
    from microctx._io.paths import check_paths
    from microctx.contract.records import read_manifest
    from microctx.service import client

    check_paths({"SUBMISSION": args.submission}, {"--receipt": args.receipt})
    manifest = read_manifest(args.submission)  # the one typed reader (RunManifest); unreadable: none sent
    try:
        # the receipt's file is staged before the submission is sent: a --receipt that cannot be
        # written (no such folder, a folder in the way, no permission) is refused while no look is spent
        with AtomicOutputs() as staged:
            receipt = staged.stage(args.receipt) if args.receipt else None
            meta = None if manifest is None else manifest.as_dict()
            result = client.submit(args.submission, args.server, args.token_env, meta)
            if receipt is not None:
                receipt.write(client.receipt_bytes(result))
    except client.Refused as exc:
        print(f"microctx submit: {exc}", file=sys.stderr)
        return EXIT_FAIL
    print(client.result_line(result))
    return EXIT_OK


def cmd_leaderboard(args) -> int:
    from microctx.service import client

    try:
        board = client.fetch_leaderboard(args.server)
    except client.Refused as exc:
        print(f"microctx leaderboard: {exc}", file=sys.stderr)
        return EXIT_FAIL
    print("\n".join(client.leaderboard_lines(board)))
    return EXIT_OK


def cmd_receipt_verify(args) -> int:
    from microctx.service.receipts import is_valid, load_public_key, load_receipt

    key = load_public_key(args.key)
    receipt = load_receipt(args.receipt)
    if not is_valid(receipt, key):
        print(
            f"microctx receipt verify: {args.receipt}: INVALID: the signature does not match this key and payload",
            file=sys.stderr,
        )
        return EXIT_FAIL
    p = receipt["payload"]
    print(
        f"valid: {p['team']} {p['part']} {p['metric']} {p['released']} ({p['decision']}) at {p['at']}, "
        f"submission {p['submission_sha256'][:12]}…, answers {p['answers_sha256'][:12]}…"
    )
    return EXIT_OK


def _admin_parsers(serve) -> None:
    admin = serve.add_subparsers(dest="serve_command", metavar="admin").add_parser(
        "admin", help="manage a competition's state: teams, tokens, the receipt key, closing"
    )
    commands = admin.add_subparsers(dest="admin_command", required=True, metavar="ACTION")
    for name, help_text in (
        ("add-team", "register a team; prints its token alone on the last line"),
        ("revoke", "revoke a team's token"),
        ("public-key", "print the receipt key (base64 of the Ed25519 public key, one line)"),
        ("close", "close the competition: no more submissions, the private board is released"),
    ):
        p = commands.add_parser(name, help=help_text)
        if name in ("add-team", "revoke"):
            p.add_argument("name", metavar="NAME")
        p.add_argument("--state", required=True, metavar="URL", help="sqlite:///FILE, a file path, or postgresql://...")
        p.set_defaults(func=cmd_admin)


def register_service_commands(sub) -> None:
    """Add serve, submit, leaderboard and receipt to microctx's subcommands."""
    serve = sub.add_parser(
        "serve",
        help="the grader as a service: answers stay in it, every look is counted",
        description="Serve the grader over HTTP (docs/service.md). The answer file must be readable by its owner only.",
    )
    serve.add_argument("--answers", help="answer bundle (mode 600, owned by the service's user)")
    serve.add_argument("--public", help="public corpus")
    serve.add_argument("--state", metavar="URL", help="sqlite:///FILE (default kind), a file path, or postgresql://...")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=_port, default=8000)
    serve.add_argument("--daily-quota", type=_count, metavar="N", help="scored submissions per team per UTC day")
    serve.add_argument("--total-quota", type=_count, metavar="N", help="scored submissions per team in total")
    serve.add_argument("--ladder", choices=("on", "off"), default="on", help="release public scores through the Ladder")
    serve.set_defaults(func=cmd_serve)
    _admin_parsers(serve)

    p = sub.add_parser("submit", help="send a submission to a grading service; prints the released score")
    p.add_argument("submission", metavar="SUBMISSION")
    p.add_argument("--server", required=True, metavar="URL")
    p.add_argument(
        "--token-env", default="MICROCTX_TOKEN", metavar="VAR", help="variable holding the token (default %(default)s)"
    )
    p.add_argument("--receipt", metavar="FILE", help="write the signed receipt here")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("leaderboard", help="print a grading service's leaderboard")
    p.add_argument("--server", required=True, metavar="URL")
    p.set_defaults(func=cmd_leaderboard)

    receipt = sub.add_parser("receipt", help="signed receipts of a grading service")
    verify = receipt.add_subparsers(dest="receipt_command", required=True, metavar="ACTION").add_parser(
        "verify", help="check a receipt offline: exit 0 valid, 1 invalid, 2 unusable"
    )
    verify.add_argument("receipt", metavar="RECEIPT.json")
    verify.add_argument("--key", required=True, metavar="KEYFILE", help="the output of `microctx serve admin public-key`")
    verify.set_defaults(func=cmd_receipt_verify)
