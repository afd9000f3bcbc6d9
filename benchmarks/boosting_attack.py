"""The boosting attack of Blum & Hardt (2015) against the grading service, with and without the Ladder.

The attacker knows nothing about the answers. Its base submission is the s8f gold answers with
the state of a random half of the test records flipped (so every record is right or wrong with
probability 1/2, as in the paper's random labels), and for each record it has two options:
its base answer, or the base answer with the state flipped (exactly one of the two is right).
It sends K queries, each a random mix of the two options (every record flipped with
probability 1/2, so every query's expected rate is 1/2), keeps the queries the board rewarded
(a score the board released, above 1/2: a query the Ladder did not release tells nothing), and
submits the per-record majority vote of the kept queries. Every query goes through the
service's own intake (`microctx.service.intake.accept`: the scorer, the Ladder, the ledger, a
real SQLite state), once with the Ladder off (every public score released, rounded) and once
with it on.

Printed: the final submission's exact-record rate minus the base's, on the public part (what
the board shows) and the private part (what the attacker really gained), for each setting and
each repetition, and their means.

    python benchmarks/boosting_attack.py [--queries 200] [--repeats 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402
import orjson  # noqa: E402
from service_support import submission  # noqa: E402  (the gold answers with chosen states flipped)

from microctx.corpus import snapshot as data  # noqa: E402
from microctx.service import intake, state, tokens  # noqa: E402
from microctx.service.competition import Scored, load_competition, score  # noqa: E402
from microctx.service.db import competition, open_state  # noqa: E402
from microctx.service.quotas import Quota  # noqa: E402
from microctx.service.receipts import new_private_key  # noqa: E402

CHANCE = 0.5


@dataclass
class Outcome:
    ladder: bool
    public_gain: float
    private_gain: float
    kept: int
    queries: int


def _service(answers_path: Path, public_path: Path, folder: Path, split_seed: str, ladder: bool):
    """A fresh SQLite state whose competition has the given split seed, and one team."""
    folder.mkdir(parents=True, exist_ok=True)
    engine = open_state(f"sqlite:///{folder / f'state-{ladder}.db'}")
    with engine.begin() as connection:
        connection.execute(
            competition.insert().values(
                id=1,
                created_at=state.iso(state.utc_now()),
                split_seed=split_seed,
                signing_key=new_private_key(),
                status=state.RUNNING,
            )
        )
    comp = load_competition(answers_path, public_path, split_seed)
    tokens.add_team(engine, "attacker")
    with engine.begin() as connection:
        team = tokens.teams_row(connection, "attacker")
    return engine, comp, intake.Settings(Quota(None, None), ladder=ladder), team


def attack(
    answers_path: Path, public_path: Path, folder: Path, *, queries: int, ladder: bool, seed: int, split_seed: str
) -> Outcome:
    engine, comp, settings, team = _service(answers_path, public_path, folder, split_seed, ladder)
    rng = np.random.default_rng(seed)
    answers = comp.answers
    test = np.array(comp.test_ids)
    base_flips = set(test[rng.random(len(test)) < 0.5])
    send = lambda flips: intake.accept(engine, comp, settings, team, orjson.dumps(submission(answers, flips)))  # noqa: E731
    send(base_flips)  # the base submission: the Ladder's first release
    kept = []
    for _ in range(queries):
        mix = rng.random(len(test)) < 0.5  # True: this record takes the other option
        result = send(base_flips ^ set(test[mix]))
        if result["decision"] != intake.ladder.NOT_SIGNIFICANT and result["score"] > CHANCE:
            kept.append(mix)
    votes = np.mean(kept, axis=0) > 0.5 if kept else np.zeros(len(test), dtype=bool)
    final, base = (score(comp, submission(answers, flips)) for flips in (base_flips ^ set(test[votes]), base_flips))
    engine.dispose()
    return Outcome(ladder, _gain(final, base, comp.part("public")), _gain(final, base, comp.part("private")), len(kept), queries)


def _gain(final: Scored, base: Scored, mask: np.ndarray) -> float:
    return final.rate(mask) - base.rate(mask)


def run(queries: int, repeats: int, seed: int) -> list[Outcome]:
    paths = data.s8f()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="microctx-attack-") as work:
        answers = Path(work) / "answers.json"
        answers.write_bytes(Path(paths.answers).read_bytes())
        answers.chmod(0o600)
        for repeat in range(repeats):
            split_seed = np.random.default_rng([seed, repeat]).bytes(32).hex()
            for ladder in (False, True):
                folder = Path(work) / f"r{repeat}"
                folder.mkdir(exist_ok=True)
                outcomes.append(
                    attack(
                        answers,
                        Path(paths.public),
                        folder,
                        queries=queries,
                        ladder=ladder,
                        seed=seed * 1000 + repeat,
                        split_seed=split_seed,
                    )
                )
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    outcomes = run(args.queries, args.repeats, args.seed)
    print("ladder\tqueries\tkept\tpublic_gain\tprivate_gain")
    for o in outcomes:
        print(f"{'on' if o.ladder else 'off'}\t{o.queries}\t{o.kept}\t{o.public_gain:+.4f}\t{o.private_gain:+.4f}")
    for ladder in (False, True):
        mine = [o for o in outcomes if o.ladder == ladder]
        print(
            f"mean, ladder {'on' if ladder else 'off'}: public gain {np.mean([o.public_gain for o in mine]):+.4f}, "
            f"private gain {np.mean([o.private_gain for o in mine]):+.4f} ({len(mine)} repetitions)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
