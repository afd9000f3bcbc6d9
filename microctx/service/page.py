"""The leaderboard page (`GET /`): server-rendered HTML, no script at all, every name escaped."""

from __future__ import annotations

from html import escape

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:60em;color:#222}
table{border-collapse:collapse;width:100%}th,td{padding:.4em .7em;border-bottom:1px solid #ddd;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}tr.g0{background:#f3f6fb}tr.g1{background:#fff}
.bar{position:relative;height:.7em;background:#eee;min-width:10em}.bar span{position:absolute;top:0;bottom:0;background:#6b8fc9}
.bar i{position:absolute;top:-.2em;bottom:-.2em;width:2px;background:#123}.note{color:#555;font-size:.9em}
"""


def _bar(score: float, low: float, high: float) -> str:
    def pct(x: float) -> str:
        return f"{max(0.0, min(1.0, x)) * 100:.1f}%"

    return (
        f"<div class='bar' title='95% interval {low:.3f} to {high:.3f}'>"
        f"<span style='left:{pct(low)};width:{pct(high - low)}'></span><i style='left:{pct(score)}'></i></div>"
    )


def render(document: dict) -> str:
    """The page of a leaderboard document (`leaderboard.board`)."""
    part = document["part"]
    rows = []
    for team in document["teams"]:
        rows.append(
            f"<tr class='g{team['rank_group'] % 2}'><td class='num'>{team['rank_group']}</td>"
            f"<td class='team'>{escape(team['team'])}</td><td class='num'>{team['score']:.3f}</td>"
            f"<td class='num'>{team['ci_low']:.3f} – {team['ci_high']:.3f}</td><td>{_bar(team['score'], team['ci_low'], team['ci_high'])}</td>"
            f"<td class='num'>{team['looks']}</td></tr>"
        )
    status = (
        "Closed: the private board (records never scored for anyone while the competition ran)."
        if document["status"] == "closed"
        else "Running: the public board. Scores are released by the Ladder; the private board appears after close."
    )
    empty = "" if rows else "<p>No released score yet.</p>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>microctx leaderboard ({escape(part)})</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<style>{_STYLE}</style></head><body>
<h1>Leaderboard: {escape(part)} part</h1>
<p>{escape(status)}</p>
<p class="note">Corpus <code>{escape(document["corpus_sha256"][:12])}…</code>; {document["records"]} {escape(part)} test records in
{document["components"]} split components. Metric: exact-record rate.</p>
<table><thead><tr><th>rank group</th><th>team</th><th>score</th><th>95% interval</th><th></th><th>looks</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table>{empty}
<p class="note">{escape(document["method"])}. Teams that share a rank group are not separated by the test.</p>
</body></html>
"""
