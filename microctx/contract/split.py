"""Split assignment: records grouped into components, each component hashed into a split.

Two records join a component when their titles are identical, their bodies are identical, or
one references the other (pattern R over title + body, numbers inside the corpus only). A
component's key is its smallest issue number in decimal; the first byte of SHA-256(key) modulo
10 picks the split: 0-1 train, 2-3 tune, 4-9 test. So duplicates and linked neighbourhoods never
straddle splits, and the assignment does not depend on source order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence

SPLITS = ("train", "tune", "test")


def split_for_key(smallest_number: int) -> str:
    bucket = hashlib.sha256(str(smallest_number).encode()).digest()[0] % 10
    return "train" if bucket < 2 else "tune" if bucket < 4 else "test"


def components(
    numbers: Sequence[int], titles: Sequence[object], bodies: Sequence[object], references: Sequence[Iterable[int]]
) -> dict[int, int]:
    """Map each issue number to the smallest issue number of its component (titles and bodies:
    anything equal exactly when the texts are, such as their digests)."""

    def links() -> Iterator[tuple[int, int]]:
        first_with: dict[tuple[str, object], int] = {}
        for number, title, body, refs in zip(numbers, titles, bodies, references):
            for key in (("title", title), ("body", body)):
                first = first_with.setdefault(key, number)
                if first != number:
                    yield number, first
            for ref in refs:
                yield number, ref

    return linked_components(numbers, links())


def linked_components(numbers: Iterable[int], links: Iterable[tuple[int, int]]) -> dict[int, int]:
    """Map each issue number to the smallest issue number of its component, the components
    joined by `links` (pairs of numbers; a pair naming a number outside `numbers` joins nothing)."""
    parent = {n: n for n in numbers}

    def find(n: int) -> int:
        root = n
        while parent[root] != root:
            root = parent[root]
        while parent[n] != root:
            parent[n], n = root, parent[n]
        return root

    for a, b in links:
        if b in parent:
            ra, rb = find(a), find(b)
            if ra < rb:
                parent[rb] = ra
            elif rb < ra:
                parent[ra] = rb
    # a union keeps the smaller number as root, so each root is its component's minimum
    return {n: find(n) for n in parent}


def assign_splits(
    numbers: Sequence[int], titles: Sequence[object], bodies: Sequence[object], references: Sequence[Iterable[int]]
) -> dict[int, str]:
    """Map each issue number to its split."""
    return splits_of(components(numbers, titles, bodies, references))


def splits_of(roots: dict[int, int]) -> dict[int, str]:
    """Each number's split, from the map of each number to its component's smallest number."""
    by_root = {root: split_for_key(root) for root in set(roots.values())}
    return {n: by_root[root] for n, root in roots.items()}
