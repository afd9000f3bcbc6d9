"""Candidates and how they run: the registry, the isolated runner and its manifests, the sandbox
(bubblewrap and limits) and the network record proxy, the devkit of tuning answers, and the
built-in candidates (exact-sql, text-only).
"""
