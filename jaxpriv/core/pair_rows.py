"""The rows a max over ordered pairs of rows can need: a tall mechanism's pair levels from a few.

A pair level is ``max_{d ≠ d'} f(K[d,·], K[d',·])``; its cost grows as ``n²``. Two exact
reductions of the rows, before any pair is formed:

* **Duplicates** (any ``f`` with ``f(P, P) = 0 ≤ f``): a row equal to another adds only pairs
  of value 0 and copies of pairs already there. A mechanism over databases often has many (a
  counting query's rows depend on the count alone).
* **Rows inside the convex hull of the others** (``f`` jointly quasi-convex: every sublevel set
  ``{(P, Q): f(P, Q) ≤ c}`` convex): the max of such an ``f`` over ``conv(rows) × conv(rows)``
  is attained at a pair of its vertices, and those are pairs of rows. TV, KL, χ² and δ(ε) are
  jointly convex (f-divergences); Rényi of order ``α > 1`` is ``log`` of a jointly convex sum;
  zCDP, ε(δ) and the GDP level are a sup, or a least value, over such sublevel sets (Bun,
  Steinke 2016, Def. 1.1; Dong, Roth, Su 2022, Def. 2.6), and so quasi-convex too. The
  composed levels are not jointly quasi-convex in general (``P ↦ P^⊗k`` is not linear): they
  drop duplicates only (with two outputs the ends would do as well, every other pair being a
  garbling of theirs). Only the case where the hull is cheap is taken:
  rows with two outputs of positive mass (points on a segment), of which only the two ends are
  vertices — ``argmin`` and ``argmax`` of ``log K[·, a] − log K[·, b]``, ties kept.

Rows are on the simplex to within a few units in the last place (``Mechanism`` renormalizes
them), and the ends are chosen by log-ratio: a row left out differs from a convex combination
of those kept by at most a few units in the last place of each entry, relative — as each
level's own float64 rounding does.

Examples:
  >>> import numpy as np
  >>> K = np.array([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8], [0.5, 0.5]])
  >>> rows_for_pair_max(np.log(K), hull=True).tolist()
  [0, 2]
  >>> rows_for_pair_max(np.log(K), hull=False).tolist()
  [0, 1, 2]
"""

from __future__ import annotations

import numpy as np

__all__ = ["rows_for_pair_max"]


def rows_for_pair_max(log_K: np.ndarray, hull: bool) -> np.ndarray:
    """The rows of one mechanism a max over its ordered pairs of distinct rows needs.

    Args:
      log_K: ``log K``, shape ``(n, m)``, rows on the simplex (``-inf`` for a zero).
      hull: the pair quantity is jointly quasi-convex (else duplicates alone are dropped).

    Returns:
      Increasing row indices, shape ``(r,)``, ``1 ≤ r ≤ n``: the first of each set of equal
      rows and, where ``hull`` and the rows put mass on two outputs only, the two ends.
    """
    log_K = np.asarray(log_K)
    if np.isnan(log_K).any():  # (no order to take ends by: every row, and the level's NaN)
        return np.arange(log_K.shape[0])
    _, first = np.unique(log_K, axis=0, return_index=True)
    rows = np.sort(first)
    support = np.flatnonzero((log_K[rows] > -np.inf).any(axis=0))
    if not hull or len(support) != 2 or len(rows) <= 2:
        return rows
    a, b = log_K[rows][:, support[0]], log_K[rows][:, support[1]]
    with np.errstate(invalid="ignore"):
        ratio = a - b  # −inf where K[·, a] = 0, +inf where K[·, b] = 0 (never both)
    ends = (ratio == ratio.min()) | (ratio == ratio.max())
    return rows[ends]
