"""The grader as a service: answers stay in the service, every look is counted, the board resists overfitting.

`microctx serve` holds the answer bundle in its own process and grades submissions over HTTP
with the project's scorer (`microctx.contract.score.grade`, validated as `microctx grade`
validates). The room, by concern:

- `db`: the tables (SQLAlchemy Core) and opening a state URL (SQLite file or PostgreSQL), with
  the Alembic migrations in `migrations/`.
- `state`: the competition row (secret split seed, signing key, status), the ledger, the
  submissions, the chosen submission per team.
- `tokens`: teams and bearer tokens (only a hash stored, compared in constant time, revocable).
- `quotas`: per-team daily and total quotas, checked and taken inside one transaction.
- `competition`: the loaded answers, the public/private split by split component, and the
  scoring of one submission into per-record outcomes.
- `ladder`: the cluster-aware parameter-free Ladder (Blum & Hardt, 2015).
- `receipts`: Ed25519-signed receipts and their offline verification.
- `leaderboard` and `page`: the board (intervals, rank groups) as JSON and as HTML.
- `app` and `server`: the Starlette routes and the uvicorn process; `client`: `submit` and
  `leaderboard` on httpx; `cli`: the command registrations.

docs/service.md explains the mechanism and what it assumes.
"""
