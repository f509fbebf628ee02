"""Weight spectra: the idea behind weight-spectrum tools such as WeightWatcher.

For a weight matrix ``W`` (N x M, N >= M after transposing) the *empirical spectral density*
is the histogram of the eigenvalues of the correlation matrix ``X = W^T W / N``, i.e. the
squared singular values of ``W`` divided by ``N``. For an i.i.d. random matrix with entry
variance ``sigma^2`` they fill the Marchenko--Pastur bulk
``[sigma^2 (1 - sqrt(q))^2, sigma^2 (1 + sqrt(q))^2]`` with ``q = M / N``. Training moves
mass into a heavy tail that is well described by a power law ``p(x) ~ x^(-alpha)`` above some
``x_min``; :func:`fit_power_law` estimates ``alpha`` by maximum likelihood and chooses
``x_min`` by the Kolmogorov--Smirnov distance (Clauset, Shalizi and Newman, 2009), the method
of the ``powerlaw`` package that WeightWatcher calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "esd",
    "mp_bounds",
    "PowerLawFit",
    "alpha_mle",
    "fit_power_law",
    "sample_power_law",
    "layer_alphas",
]


def esd(weight: torch.Tensor | np.ndarray) -> np.ndarray:
    """Eigenvalues of ``W^T W / N`` (ascending, float64), N = the larger dimension of ``W``."""
    w = weight.detach().cpu().double().numpy() if isinstance(weight, torch.Tensor) else weight
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 2 or min(w.shape) == 0:
        raise ValueError(f"esd: weight must be a non-empty 2-D matrix, got shape {w.shape}")
    s = np.linalg.svd(w, compute_uv=False)
    return np.sort(s**2 / max(w.shape))


def mp_bounds(n_rows: int, n_cols: int, sigma2: float = 1.0) -> tuple[float, float]:
    """Edges of the Marchenko--Pastur bulk for an ``n_rows x n_cols`` matrix of variance
    ``sigma2`` entries (eigenvalues of ``W^T W / N``, N = the larger dimension)."""
    q = min(n_rows, n_cols) / max(n_rows, n_cols)
    return sigma2 * (1 - q**0.5) ** 2, sigma2 * (1 + q**0.5) ** 2


@dataclass
class PowerLawFit:
    """A power-law tail: exponent ``alpha``, cut-off ``xmin``, KS distance ``D``, tail size."""

    alpha: float
    xmin: float
    D: float
    n_tail: int


def alpha_mle(x: np.ndarray, xmin: float) -> float:
    """Continuous maximum-likelihood exponent ``1 + n / sum(log(x_i / xmin))`` over x >= xmin."""
    tail = np.asarray(x, dtype=np.float64)
    tail = tail[tail >= xmin]
    if len(tail) < 2:
        raise ValueError(f"alpha_mle: fewer than 2 values are >= xmin={xmin}")
    return 1.0 + len(tail) / float(np.sum(np.log(tail / xmin)))


def _ks(tail: np.ndarray, alpha: float, xmin: float) -> float:
    """KS distance between the empirical CDF of the (sorted) tail and the fitted power law."""
    n = len(tail)
    model = 1.0 - (tail / xmin) ** (1.0 - alpha)
    emp = np.arange(n) / n  # the powerlaw package compares against the left-continuous CDF
    return float(np.max(np.abs(emp - model)))


def fit_power_law(x, xmin: float | None = None, min_tail: int = 10) -> PowerLawFit:
    """Fit ``p(x) ~ x^(-alpha)`` to the values ``x >= xmin``.

    Args:
        x: positive samples (e.g. the eigenvalues from :func:`esd`).
        xmin: fixed cut-off; ``None`` tries every sample as ``xmin`` (keeping at least
            ``min_tail`` values in the tail) and keeps the one with the smallest KS distance.
    """
    vals = np.sort(np.asarray(x, dtype=np.float64).ravel())
    vals = vals[vals > 0]
    if len(vals) < 2:
        raise ValueError(f"fit_power_law: need at least 2 positive values, got {len(vals)}")
    if xmin is not None:
        tail = vals[vals >= xmin]
        a = alpha_mle(tail, xmin)
        return PowerLawFit(a, float(xmin), _ks(tail, a, xmin), len(tail))
    candidates = np.unique(vals[: max(len(vals) - min_tail, 1)])
    best = None
    for xm in candidates:
        tail = vals[vals >= xm]
        a = alpha_mle(tail, xm)
        d = _ks(tail, a, xm)
        if best is None or d < best.D:
            best = PowerLawFit(a, float(xm), d, len(tail))
    return best


def sample_power_law(n: int, alpha: float, xmin: float = 1.0, seed: int = 0) -> np.ndarray:
    """``n`` samples of a continuous power law with exponent ``alpha > 1`` (inverse CDF)."""
    if alpha <= 1:
        raise ValueError(f"sample_power_law: alpha must be > 1, got {alpha}")
    u = np.random.default_rng(seed).random(n)
    return xmin * (1.0 - u) ** (-1.0 / (alpha - 1.0))


def layer_alphas(model: torch.nn.Module, min_size: int = 32) -> dict[str, PowerLawFit]:
    """Power-law fit of every 2-D weight of ``model`` whose smaller side is >= ``min_size``."""
    out = {}
    for name, p in model.named_parameters():
        if p.ndim == 2 and min(p.shape) >= min_size:
            out[name] = fit_power_law(esd(p))
    return out
