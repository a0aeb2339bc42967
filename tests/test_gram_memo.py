"""GramMemo: kept features and inner products equal the ones computed directly."""

from __future__ import annotations

import numpy as np

from workbench.search.gram_memo import LIMIT, MAX_BYTES, GramMemo, limit_for


def test_matrices_equal_a_direct_computation_in_any_order_and_past_the_limit() -> None:
    rng = np.random.default_rng(0)
    features = rng.standard_normal((300, 40))
    calls: list[int] = []

    def feature_rows(rows: np.ndarray) -> np.ndarray:
        calls.append(len(rows))
        return features[rows]

    memo = GramMemo(300, feature_rows, limit=100)
    order = rng.permutation(300)
    asked = [order[:10], order[10:40], order[40:70]]
    asked.append(np.concatenate([asked[1][::-1], asked[0]]))  # all kept already, reordered
    for rows in asked:
        phi, gram = memo.matrices(rows)
        assert np.array_equal(phi, features[rows])
        assert np.allclose(gram, features[rows] @ features[rows].T, rtol=0, atol=1e-12)
    assert len(memo) == 70 and sum(calls) == 70  # each row's features computed once
    # more than the limit: computed directly, the memo stays as it was
    rows = rng.choice(300, 90, replace=False)
    phi, gram = memo.matrices(rows)
    assert np.allclose(gram, features[rows] @ features[rows].T, rtol=0, atol=1e-12)
    assert len(memo) == 70
    # the caller may change what it gets (the tuner adds noise to the diagonal)
    _, gram = memo.matrices(asked[0])
    gram += 1.0
    _, again = memo.matrices(asked[0])
    assert np.allclose(again, features[asked[0]] @ features[asked[0]].T, rtol=0, atol=1e-12)


def test_many_features_keep_fewer_configs() -> None:
    assert limit_for(490) == LIMIT  # the recorded gemm space's model
    few = limit_for(100_000)
    assert 1 <= few < LIMIT
    assert 8 * few * (100_000 + few) <= MAX_BYTES
