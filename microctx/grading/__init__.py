"""Scoring a submission against the answers, the per-fact outcome table, and slice statistics."""
