"""Maximum inner product search (MIPS) oracles: the inexact margin of MEMOIR (Belyy, ch. 5).

MEMOIR needs, for a training pair ``(x, y)``, the class ``r = argmax_{r != y} x·w_r`` among the
K rows of the weight matrix (the *margin* of eq. (1) of the paper). An oracle may return a
class whose score is below the maximum: the difference ``ε = max_{r≠y} x·w_r − x·w_r̂ ≥ 0`` is the
margin error that Theorem 1 bounds. Every oracle here has the same small interface::

    oracle.build(V)                            # index the K rows of V (K × D, float64)
    r, s = oracle.query(X, exclude)            # batch of CSR rows; r[i] != exclude[i]
    oracle.update(V, rows, row_sq, linear)     # rows of V that changed since the last query
    oracle.n_inner_products                    # exact x·w evaluations made by query()

``row_sq`` holds the squared row norms of ``V`` (the caller maintains them). ``linear`` is an
optional ``(rows, coefs, qpos)`` triple saying the change was purely additive,
``V[rows[k]] += coefs[k] * X_last[qpos[k]]`` with ``X_last`` the last query batch; an oracle may
use it to update in O(bits) instead of O(D) (SimpleLSH does).

Every oracle checks its inputs (``V`` finite, K >= 2; queries with exactly D columns and
indices in [0, D); ``exclude`` integers in [0, K), one per query) before a kernel could read
out of bounds, with a ``ValueError`` naming the argument. ``detach()`` drops an oracle's index
and weights, keeping its parameters and counters.

Oracles
-------
:class:`ExactMIPS`  brute force over all K rows in numba: ``K·nnz(x)`` per query.
:class:`SimpleLSH`  Neyshabur & Srebro (2015): rows scaled by the largest norm and padded with
                    ``sqrt(1 − ‖w‖²/M²)``, queries normalised and padded with 0, signed random
                    projections; candidates by Hamming ranking, re-scored exactly. Rows
                    ``w = 0`` answer with score 0 without an inner product; ``n_top``
                    re-scores the longest rows for every query (they win on their norm).
:class:`HNSWMIPS`   a navigable small-world graph (HNSW, the successor of the SW-graph the
                    paper used through nmslib) in inner-product space: hnswlib's, which
                    replaces changed rows in place (training), or faiss's, which counts the
                    distances its search computes (static queries).

Package layout: ``kernels`` (numba), ``_checks`` (input validation), ``oracles`` (classes).
"""
from __future__ import annotations

from .kernels import exact_argmax_other, simple_lsh_transform
from .oracles import ORACLES, ExactMIPS, HNSWMIPS, SimpleLSH, make_oracle

__all__ = ["ExactMIPS", "SimpleLSH", "HNSWMIPS", "make_oracle", "simple_lsh_transform",
           "exact_argmax_other", "ORACLES"]
