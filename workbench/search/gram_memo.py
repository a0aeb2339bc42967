"""Features of evaluated configs and their inner products, kept between the model's fits.

The portfolio's model is refitted after every new observation, on up to a few hundred evaluated
configs. From one fit to the next these change little (one config more), so each config's
feature row and its inner products with the others are computed once and kept: a fit gathers
them instead of rebuilding an n x D feature matrix and an n x n Gram matrix (about 2.5 of the 4
ms of a fit on the recorded gemm space at n = 256, measured). The memo grows with the evaluated
configs, so it stops growing at ``limit`` of them and fits past that compute the matrices
directly (the same numbers, up to rounding).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Evaluated configs whose features and inner products are kept at most (the Gram matrix
#: is limit x limit: 32 MiB at 2048) ...
LIMIT = 2048
#: ... and fewer when the features are many: the memo stays within this many bytes.
MAX_BYTES = 64 * 2**20


def limit_for(n_features: int) -> int:
    """How many configs a memo of ``n_features`` features per config may keep: LIMIT, or
    fewer so that features and Gram matrix stay within MAX_BYTES."""
    return max(1, min(LIMIT, MAX_BYTES // (8 * (n_features + LIMIT))))


class GramMemo:
    """Feature rows of ``n_configs`` configs (by row index) and their Gram matrix, filled as
    rows are asked for; ``features`` maps an array of rows to their feature matrix."""

    def __init__(
        self,
        n_configs: int,
        features: Callable[[np.ndarray], np.ndarray],
        *,
        limit: int = LIMIT,
    ) -> None:
        self._features = features
        self.limit = limit
        self._slot = np.full(n_configs, -1, dtype=np.int64)  # row -> position in the memo
        self._n = 0
        self._phi = np.zeros((0, 0))
        self._gram = np.zeros((0, 0))

    def __len__(self) -> int:
        return self._n

    def matrices(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The feature matrix of ``rows`` and its Gram matrix ``phi @ phi.T``."""
        new = rows[self._slot[rows] < 0]
        if self._n + len(new) > self.limit:
            phi = self._features(rows)
            return phi, phi @ phi.T
        if len(new):
            self._add(new)
        at = self._slot[rows]
        # whole rows first, then columns: two passes over contiguous memory beat one
        # scattered gather from a matrix larger than the cache
        return self._phi.take(at, axis=0), self._gram.take(at, axis=0).take(at, axis=1)

    def _add(self, rows: np.ndarray) -> None:
        phi = self._features(rows)
        n, end = self._n, self._n + len(rows)
        if end > len(self._gram):  # grow by doubling, up to the limit
            size = min(self.limit, max(end, 2 * len(self._gram), 64))
            grown_phi = np.zeros((size, phi.shape[1]))
            if n:
                grown_phi[:n] = self._phi[:n]
            grown_gram = np.zeros((size, size))
            grown_gram[:n, :n] = self._gram[:n, :n]
            self._phi, self._gram = grown_phi, grown_gram
        self._phi[n:end] = phi
        cross = self._phi[:end] @ phi.T  # the new rows against every kept row, themselves too
        self._gram[:end, n:end] = cross
        self._gram[n:end, :end] = cross.T
        self._slot[rows] = np.arange(n, end)
        self._n = end
