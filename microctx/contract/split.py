"""Split assignment: records grouped into components, each component hashed into a split.

Two records join a component when their titles are identical, their bodies are identical, or
one references the other (pattern R over title + body, numbers inside the corpus only). A
component's key is its smallest issue number in decimal; the first byte of SHA-256(key) modulo
10 picks the split: 0-1 train, 2-3 tune, 4-9 test. So duplicates and linked neighbourhoods never
straddle splits, and the assignment does not depend on source order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

SPLITS = ("train", "tune", "test")


def split_for_key(smallest_number: int) -> str:
    bucket = hashlib.sha256(str(smallest_number).encode()).digest()[0] % 10
    return "train" if bucket < 2 else "tune" if bucket < 4 else "test"


def components(
    numbers: Sequence[int], titles: Sequence[str], bodies: Sequence[str], references: Sequence[Iterable[int]]
) -> dict[int, int]:
    """Map each issue number to the smallest issue number of its component."""
    parent = {n: n for n in numbers}

    def find(n: int) -> int:
        root = n
        while parent[root] != root:
            root = parent[root]
        while parent[n] != root:
            parent[n], n = root, parent[n]
        return root

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            if ra < rb:
                parent[rb] = ra
            else:
                parent[ra] = rb

    first_with: dict[tuple[str, str], int] = {}
    for number, title, body, refs in zip(numbers, titles, bodies, references):
        for key in (("title", title), ("body", body)):
            if key in first_with:
                union(number, first_with[key])
            else:
                first_with[key] = number
        for ref in refs:
            if ref in parent:
                union(number, ref)
    # union keeps the smaller number as root, so each root is its component's minimum
    return {n: find(n) for n in numbers}


def assign_splits(
    numbers: Sequence[int], titles: Sequence[str], bodies: Sequence[str], references: Sequence[Iterable[int]]
) -> dict[int, str]:
    """Map each issue number to its split."""
    roots = components(numbers, titles, bodies, references)
    by_root = {root: split_for_key(root) for root in set(roots.values())}
    return {n: by_root[root] for n, root in roots.items()}
