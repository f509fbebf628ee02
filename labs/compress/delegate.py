"""Operator coverage and delegation: which parts of a graph an accelerator can take.

A phone's NPU or GPU runs only the operators (and number formats) its driver implements. A
runtime (TensorFlow Lite delegates, ONNX Runtime execution providers, ExecuTorch backends) walks
the graph, hands each maximal run of supported nodes to the accelerator as one *partition*, and
runs the rest on the CPU. Every boundary between a partition and CPU code costs a copy or a
synchronisation, so one unsupported operator in the middle of a model can cost more than the
accelerator saves.

* :func:`onnx_ops` -- the operator types of an ``.onnx`` file's nodes, in graph order.
* :func:`partition` -- split a node sequence into runs on the accelerator and on the CPU.
* :func:`coverage` -- fraction of nodes supported, number of accelerator partitions, transitions.
"""

from __future__ import annotations

import os
from collections import Counter

__all__ = ["onnx_ops", "partition", "coverage", "op_counts"]


def onnx_ops(path: str | os.PathLike) -> list[str]:
    """Operator types (``node.op_type``) of the main graph of an ONNX file, in topological order."""
    import onnx

    return [node.op_type for node in onnx.load(str(path), load_external_data=False).graph.node]


def op_counts(ops: list[str]) -> Counter:
    """How many nodes of each operator type."""
    return Counter(ops)


def partition(ops: list[str], supported: set[str]) -> list[tuple[str, int]]:
    """Group consecutive nodes by where they run: ``[("accelerator", n), ("cpu", m), ...]``.

    The graph is taken in its topological order, as a greedy delegate sees it; each tuple holds
    the device and the number of consecutive nodes placed there.
    """
    runs: list[tuple[str, int]] = []
    for op in ops:
        where = "accelerator" if op in supported else "cpu"
        if runs and runs[-1][0] == where:
            runs[-1] = (where, runs[-1][1] + 1)
        else:
            runs.append((where, 1))
    return runs


def coverage(ops: list[str], supported: set[str]) -> dict:
    """``{"nodes", "supported", "fraction", "partitions", "transitions", "unsupported"}``.

    ``partitions`` counts accelerator runs, ``transitions`` every change of device along the
    graph (each one a hand-over of tensors), ``unsupported`` the operator types left to the CPU.
    """
    runs = partition(ops, supported)
    n_sup = sum(n for where, n in runs if where == "accelerator")
    return {
        "nodes": len(ops),
        "supported": n_sup,
        "fraction": n_sup / len(ops) if ops else 0.0,
        "partitions": sum(1 for where, _ in runs if where == "accelerator"),
        "transitions": max(0, len(runs) - 1),
        "unsupported": sorted({op for op in ops if op not in supported}),
    }
