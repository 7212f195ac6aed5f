"""TensorFlow Lite's delegate partitioning: which mappable ops land in which Edge TPU subgraph."""

from __future__ import annotations

import heapq

from edgekit.tflite.model import SubgraphInfo


def partition(g: SubgraphInfo, mappable: list[bool]) -> list[tuple[bool, list[int]]]:
    """TensorFlow Lite's delegate partitioning of ``g``'s ops into alternating runs.

    Each run has one kind (mappable or not); it starts with the lowest-index ready op and absorbs
    every op of its kind whose inputs are ready, transitively. Returns [(kind, op indices)] in run
    order. O((ops + tensor uses) log ops).
    """
    n = len(g.ops)
    producer: dict[int, int] = {}
    for op in g.ops:
        for t in op.outputs:
            if t >= 0:
                producer[t] = op.index
    waiting = [0] * n
    consumers: dict[int, list[int]] = {}
    for op in g.ops:
        deps = {t for t in op.inputs if t >= 0 and t in producer}
        waiting[op.index] = len(deps)
        for t in deps:
            consumers.setdefault(t, []).append(op.index)
    ready: dict[bool, list[int]] = {True: [], False: []}
    for i in range(n):
        if waiting[i] == 0:
            heapq.heappush(ready[mappable[i]], i)
    runs: list[tuple[bool, list[int]]] = []
    done = 0
    while done < n:
        if not ready[True] and not ready[False]:  # a cycle: cannot happen in a valid model
            rest = [i for i in range(n) if waiting[i] > 0]
            runs.append((False, rest))
            break
        kind = mappable[min(h[0] for h in ready.values() if h)]
        run: list[int] = []
        heap = ready[kind]
        while heap:
            i = heapq.heappop(heap)
            run.append(i)
            done += 1
            for t in g.ops[i].outputs:
                for c in consumers.get(t, ()):
                    waiting[c] -= 1
                    if waiting[c] == 0:
                        heapq.heappush(ready[mappable[c]], c)
        runs.append((kind, sorted(run)))
    return runs


def place(g: SubgraphInfo, mappable: list[bool], multiple_subgraphs: bool = False) -> list[int | None]:
    """The Edge TPU subgraph (0, 1, ...) of every op, or None for the CPU.

    Without ``multiple_subgraphs`` (the compiler's default) only the first mappable run is an Edge
    TPU subgraph; with it (``-a``) every mappable run is one.
    """
    where: list[int | None] = [None] * len(g.ops)
    n = 0
    for kind, run in partition(g, mappable):
        if not kind or (n and not multiple_subgraphs):
            continue
        for i in run:
            where[i] = n
        n += 1
    return where
