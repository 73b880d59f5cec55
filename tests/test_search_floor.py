"""The semantic floor of hybrid ranking: the 10th percentile of the candidates' similarities,
computed without np.percentile (whose first call imports numpy.ma in a fresh process) but
bit-identical to it, so rankings do not move."""

import numpy as np
import pytest

from memlane.search.engine import _low_percentile


@pytest.mark.parametrize("seed", range(5))
def test_low_percentile_equals_numpy_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(2000):
        n = int(rng.integers(11, 500))
        values = rng.random(n) * float(rng.choice([0.3, 1.0, 2.0])) - 0.2
        if rng.random() < 0.3:
            values = np.round(values, 2)  # ties
        for q in (1.0, 10.0, 50.0, 90.0):
            assert _low_percentile(values, q) == float(np.percentile(values, q))


def test_low_percentile_leaves_the_input_in_place() -> None:
    values = np.array([0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6, 0.0, 1.0])
    before = values.copy()
    assert _low_percentile(values, 10) == pytest.approx(0.1)
    assert np.array_equal(values, before)
