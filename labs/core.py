"""The workshop's toy framework: a stack of matrix products and runners on emulated ranks.

A :class:`Model` of ``num_layers`` layers maps an input ``x`` of shape ``(batch, in_dim)``
through, per layer, ``x @ a`` (``a``: ``in_dim x hidden_dim``) then ``@ b`` (``b``:
``hidden_dim x in_dim``).  No nonlinearity, no optimizer: the point is to move weights,
activations and gradients between ranks and check the result against one device::

    from labs import core
    m = core.Model(4, 2, 6)
    i, o = core.gen_inp(10, 2)
    out = m.forward(i)
    loss = out - o            # used directly as dL/d(out)
    m.backward(loss)          # fills m.grads[layer]["a"], m.grads[layer]["b"]
    m.print_grads()

    class MyRunner(core.Runner):
        def run(self):        # one instance per rank: self.rank, self.world_size
            ...               # talk to the other ranks with labs.dist
    core.run_world(2, MyRunner)

Arrays are float64 numpy arrays; every ``labs.dist`` call accepts them and works in place.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from labs import dist

__all__ = ["Model", "gen_inp", "Runner", "run_world"]


class Model:
    """``num_layers`` blocks ``{"a": (in_dim, hidden_dim), "b": (hidden_dim, in_dim)}``.

    Attributes:
        blocks: per layer, the weights ``{"a": ndarray, "b": ndarray}``.
        inputs: per layer, the inputs saved by :meth:`forward` for :meth:`backward`.
        grads: per layer, ``{"a": dL/da, "b": dL/db}`` after :meth:`backward` (else empty).
    """

    def __init__(self, num_layers: int, in_dim: int, hidden_dim: int, seed: int = 0):
        if min(num_layers, in_dim, hidden_dim) < 1:
            raise ValueError(
                f"Model: num_layers, in_dim and hidden_dim must be >= 1, got "
                f"{num_layers}, {in_dim}, {hidden_dim}"
            )
        rng = np.random.default_rng(seed)
        self.n = num_layers
        self.in_dim = in_dim
        self.hidden_dim = hidden_dim
        self.blocks: list[dict[str, np.ndarray]] = [
            {
                "a": rng.uniform(-1, 1, (in_dim, hidden_dim)) / np.sqrt(in_dim),
                "b": rng.uniform(-1, 1, (hidden_dim, in_dim)) / np.sqrt(hidden_dim),
            }
            for _ in range(num_layers)
        ]
        self.inputs: list[dict[str, np.ndarray]] = [{} for _ in range(num_layers)]
        self.grads: list[dict[str, np.ndarray]] = [{} for _ in range(num_layers)]

    def forward(self, x: np.ndarray, layers: range | None = None) -> np.ndarray:
        """Run ``x`` (``batch x in_dim``) through the layers (all, or the given ``range``)."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.in_dim:
            raise ValueError(
                f"Model.forward: expected input of shape (batch, {self.in_dim}), got {x.shape}"
            )
        for i in layers if layers is not None else range(self.n):
            self.inputs[i]["a"] = x
            x = x @ self.blocks[i]["a"]
            self.inputs[i]["b"] = x
            x = x @ self.blocks[i]["b"]
        return x

    def backward(self, loss_grad: np.ndarray, layers: range | None = None) -> np.ndarray:
        """Back-propagate ``dL/d(output)`` through the layers (all, or ``layers``), last first.

        Fills ``grads[i]["a"]`` and ``grads[i]["b"]`` (``dL/dW = X^T dL/dY``) and returns
        ``dL/d(input)`` of the first layer processed (``dL/dX = dL/dY W^T``).
        """
        g = np.asarray(loss_grad, dtype=np.float64)
        for i in reversed(layers if layers is not None else range(self.n)):
            if "a" not in self.inputs[i]:
                raise RuntimeError(f"Model.backward: layer {i} has no saved input; run forward")
            self.grads[i]["b"] = self.inputs[i]["b"].T @ g
            g = g @ self.blocks[i]["b"].T
            self.grads[i]["a"] = self.inputs[i]["a"].T @ g
            g = g @ self.blocks[i]["a"].T
        return g

    def print_grads(self) -> None:
        """Print every layer's gradients (4 decimals)."""
        with np.printoptions(precision=4, suppress=True):
            for i, g in enumerate(self.grads):
                for k in ("a", "b"):
                    print(f"layer {i} grad {k}:\n{g.get(k, 'not computed')}")

    def difference(self, other: Model, rtol: float = 1e-9, atol: float = 1e-12) -> str | None:
        """Where ``other`` differs from this model (weights, then gradients), or None if nowhere.

        The answer names the layer, the parameter and the worst element, with the expected value
        (this model's) and the one ``other`` holds, e.g. ``"layer 2 grad b[1, 0]: expected
        0.5, got 1.0 (max abs diff 0.5)"``.
        """
        if not isinstance(other, Model):
            return f"expected a core.Model, got {type(other).__name__}"
        mine_size = (self.n, self.in_dim, self.hidden_dim)
        theirs = (other.n, other.in_dim, other.hidden_dim)
        if theirs != mine_size:
            return f"expected (num_layers, in_dim, hidden_dim) = {mine_size}, got {theirs}"
        for i in range(self.n):
            for what, ours, their in (
                ("weight", self.blocks[i], other.blocks[i]),
                ("grad", self.grads[i], other.grads[i]),
            ):
                for k in ("a", "b"):
                    x, y = ours.get(k), their.get(k)
                    if x is None or y is None:
                        if x is not None or y is not None:
                            missing = "the other model" if y is None else "the reference"
                            return f"layer {i} {what} {k} is missing in {missing}"
                        continue
                    x, y = np.asarray(x), np.asarray(y)
                    if x.shape != y.shape:
                        return f"layer {i} {what} {k}: expected shape {x.shape}, got {y.shape}"
                    if not np.allclose(y, x, rtol=rtol, atol=atol):
                        err = np.abs(x - y)
                        idx = np.unravel_index(int(np.argmax(err)), err.shape)
                        at = ", ".join(str(int(j)) for j in idx)
                        return (
                            f"layer {i} {what} {k}[{at}]: expected {x[idx]:.6g}, got {y[idx]:.6g} "
                            f"(max abs diff {float(err.max()):.3g})"
                        )
        return None

    def compare(self, other: Model, rtol: float = 1e-9, atol: float = 1e-12) -> bool:
        """True when ``other`` has the same weights and gradients (up to rounding).

        Prints the first difference found (see :meth:`difference`), so a failing exercise says
        which parameter differs and by how much.
        """
        diff = self.difference(other, rtol=rtol, atol=atol)
        if diff is not None:
            print(f"compare: {diff}")
        return diff is None

    def copy(self) -> Model:
        """A deep copy (weights, saved inputs and gradients)."""
        return copy.deepcopy(self)


def gen_inp(n: int, dim: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random inputs of size ``dim`` and ``n`` dummy targets, both ``(n, dim)`` float64."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, dim)), rng.standard_normal((n, dim))


class Runner:
    """One rank's program.  Subclass it, implement :meth:`run`, start it with :func:`run_world`.

    Attributes:
        rank: this rank (0 ... world_size - 1), also ``labs.dist.get_rank()``.
        world_size: number of ranks.
    """

    def __init__(self, rank: int, world_size: int):
        self.rank = rank
        self.world_size = world_size

    def run(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.run: implement the rank's program")


def run_world(n: int, runner_cls: type[Runner], *args: Any, timeout: float = 60.0,
              **kwargs: Any) -> list[Any]:  # fmt: skip
    """Run ``runner_cls(rank, n, *args, **kwargs).run()`` on ``n`` emulated ranks (or on this
    process's rank under torchrun) and wait; returns each rank's ``run()`` value (index = rank).

    Errors, deadlocks and timeouts are raised as by :func:`labs.dist.launch`.
    """
    if not (isinstance(runner_cls, type) and issubclass(runner_cls, Runner)):
        raise TypeError(f"run_world: expected a subclass of core.Runner, got {runner_cls!r}")

    def rank_main() -> Any:
        return runner_cls(dist.get_rank(), dist.get_world_size(), *args, **kwargs).run()

    return dist.launch(rank_main, n, timeout=timeout)
