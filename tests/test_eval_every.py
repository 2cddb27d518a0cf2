"""``eval_every``: the loss once every few epochs, the same fit in between."""
from __future__ import annotations

import numpy as np
import pytest

from xclib import datasets
from xclib.sampled import NCE, OVE, ImportanceSampling
from xclib.unbiased import ImplicitSGD, MinibatchImplicitSGD, UMax, VanillaSGD

ESTIMATORS = [VanillaSGD, UMax, ImplicitSGD, MinibatchImplicitSGD, OVE, NCE,
              ImportanceSampling]


@pytest.fixture(scope="module")
def data():
    X, y, _ = datasets.make_softmax_data(400, 20, 8, nnz_per_row=5, random_state=0)
    return X, y


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_rounds_record_the_epochs_of_an_every_epoch_fit(cls, data):
    """Seven epochs in rounds of three: the weights of the every-epoch fit, the history at
    epochs 3, 6 and 7 (the last round shorter), the step of each epoch its own."""
    kw = dict(learning_rate=0.1, decay=0.8, n_epochs=7, tol=None, alpha=1e-3,
              random_state=0)
    every = cls(**kw).fit(*data)
    rounds = cls(eval_every=3, **kw).fit(*data)
    assert rounds.history_["epoch"] == [3, 6, 7]
    assert rounds.n_epochs_ == every.n_epochs_ == 7
    np.testing.assert_array_equal(rounds.coef_, every.coef_)
    np.testing.assert_allclose(rounds.history_["train_loss"],
                               np.asarray(every.history_["train_loss"])[[2, 5, 6]],
                               rtol=1e-12)


def test_the_stopping_rule_counts_rounds(data):
    """With tol, ``n_iter_no_change`` rounds without progress stop the fit (a huge tol:
    the two rounds after the first fail), and the history still counts epochs."""
    est = ImplicitSGD(learning_rate=0.1, n_epochs=50, tol=1e3, n_iter_no_change=2,
                      eval_every=4, random_state=0).fit(*data)
    assert est.history_["epoch"] == [4, 8, 12]
    assert est.n_epochs_ == 12


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_eval_every_must_be_a_positive_int(bad, data):
    with pytest.raises(ValueError, match="eval_every"):
        OVE(eval_every=bad).fit(*data)
