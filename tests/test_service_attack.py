"""The boosting attack (benchmarks/boosting_attack.py) on s8f, small: the Ladder takes away what
the attacker gains on the public board without the Ladder, and neither setting gains privately."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.mark.slow
def test_the_ladder_stops_the_boosting_attack(tmp_path, s8f):
    import boosting_attack

    answers = tmp_path / "answers.json"
    answers.write_bytes(Path(s8f.answers).read_bytes())
    answers.chmod(0o600)
    seed = "5e" * 32
    off, on = (
        boosting_attack.attack(answers, Path(s8f.public), tmp_path / name, queries=60, ladder=ladder, seed=1, split_seed=seed)
        for name, ladder in (("off", False), ("on", True))
    )
    assert off.kept > 10 and on.kept <= 3  # the Ladder released almost nothing to learn from
    assert off.public_gain > 0.05  # without it the public board is overfitted ...
    assert off.public_gain - off.private_gain > 0.05  # ... and the private part does not follow
    assert on.public_gain < off.public_gain / 2
    assert abs(on.private_gain) < 0.05
