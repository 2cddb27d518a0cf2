"""One vocabulary, one contract: every estimator ``xclib`` exports, introspected.

For each exported estimator class:

* its parameters use the shared vocabulary (no ``lam``, ``mu``, ``eta``, ``eta0``, ``n_iter``…),
  and the shared keywords accept the same values everywhere;
* every parameter has an entry in ``_parameter_constraints`` and a bad value of each is
  rejected before fitting with an error that names it (scikit-learn's own
  ``check_param_validation``);
* with default parameters it fits standardised, well-separated data to a sensible model;
* a fitted model pickles small: fitted attributes only, never the training data.
"""
from __future__ import annotations

import inspect
import pickle
import warnings

import numpy as np
import pytest
from conftest import exported_estimators
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.preprocessing import StandardScaler
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import check_param_validation

import xclib
from xclib import base

ESTIMATORS = exported_estimators()
IDS = [cls.__name__ for cls in ESTIMATORS]

#: names another estimator library might use for a concept the vocabulary names otherwise
FORBIDDEN = {old for _, olds in base.VOCABULARY.values() for old in olds} | {
    "eta0", "n_iter", "lam", "mu", "eta", "lambda", "C", "n_iters", "epochs", "step",
}
#: (``decay`` is left out: its schedule differs by method, e.g. Memoir's inverse-time decay,
#: and each docstring states it)
SHARED = {
    "alpha": base.ALPHA, "learning_rate": base.LEARNING_RATE,
    "n_epochs": base.N_EPOCHS, "max_iter": base.MAX_ITER, "tol": base.TOL,
    "random_state": base.RANDOM_STATE, "verbose": base.VERBOSE,
    "fit_intercept": base.FIT_INTERCEPT,
}


def test_every_estimator_is_found():
    assert len(ESTIMATORS) >= 15, IDS
    assert xclib.__version__ == "0.2.0"


@pytest.mark.parametrize("cls", ESTIMATORS, ids=IDS)
def test_parameters_use_the_vocabulary(cls):
    params = cls().get_params(deep=False)
    assert not FORBIDDEN & set(params), f"{cls.__name__}: {sorted(FORBIDDEN & set(params))}"
    constraints = cls._parameter_constraints
    assert set(constraints) == set(params), (
        f"{cls.__name__}: no constraint for {sorted(set(params) - set(constraints))}, "
        f"constraint for no parameter {sorted(set(constraints) - set(params))}")
    for name, shared in SHARED.items():
        if name in params:
            # the shared keyword accepts the shared values (a method may accept more, e.g. None)
            assert all(any(str(c) == str(s) for c in constraints[name]) for s in shared), (
                f"{cls.__name__}.{name}: {constraints[name]} does not include {shared}")


@pytest.mark.parametrize("cls", ESTIMATORS, ids=IDS)
def test_every_parameter_validates_through_the_table(cls):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_param_validation(cls.__name__, cls())


#: classes whose parameters are keyword-only, as scikit-learn's (``Est(alpha)`` is an error):
#: every exported estimator and the MIPS oracles with parameters
KEYWORD_ONLY = list(dict.fromkeys([*ESTIMATORS, xclib.SimpleLSH, xclib.HNSWMIPS]))


@pytest.mark.parametrize("cls", KEYWORD_ONLY, ids=[c.__name__ for c in KEYWORD_ONLY])
def test_parameters_are_keyword_only(cls):
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert params and all(p.kind is p.KEYWORD_ONLY for p in params), cls.__name__
    with pytest.raises(TypeError, match="positional"):
        cls(params[0].default)


def _task(est, n=600, d=40, seed=0):
    """Standardised blobs: 3 classes, or 2 for the binary estimators."""
    k = 3 if get_tags(est).classifier_tags.multi_class else 2
    X, y = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=4.0, random_state=seed)
    return StandardScaler().fit_transform(X), y


@pytest.fixture(scope="module")
def fitted():
    """Each estimator fitted once with its defaults (shared by the tests below)."""
    models = {}
    for cls in ESTIMATORS:
        est = cls()
        X, y = _task(est)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.fit(X, y)
        models[cls.__name__] = (est, X, y, caught)
    return models


@pytest.mark.parametrize("name", IDS)
def test_defaults_fit_a_sensible_model(fitted, name):
    est, X, y, caught = fitted[name]
    bad = [w for w in caught if issubclass(w.category, (base.DivergenceWarning, RuntimeWarning))]
    assert not bad, [str(w.message) for w in bad]
    assert not getattr(est, "diverged_", False)
    assert np.all(np.isfinite(est.coef_))
    assert np.mean(est.predict(X) == y) >= 0.9, f"{name} with defaults: accuracy too low"


@pytest.mark.parametrize("name", IDS)
def test_fitted_model_pickles_small(fitted, name):
    est, X, y, _ = fitted[name]
    assert not hasattr(est, "_state"), f"{name} keeps its solver state"
    for attr, value in vars(est).items():
        assert value is not X and not (
            hasattr(value, "shape") and getattr(value, "shape", None) == X.shape), (
            f"{name}.{attr} holds the training matrix")
    size = len(pickle.dumps(est))
    # the model: coef_ and a few per-class or per-row vectors; the data would be 600 × 40 × 8
    budget = 4 * est.coef_.nbytes + 24 * X.shape[0] + 60_000
    assert size < budget < X.nbytes, f"{name}: pickle {size} B, budget {budget} B"
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict(X), est.predict(X))


@pytest.mark.parametrize("name", IDS)
def test_same_seed_same_numbers(fitted, name):
    est, X, y, _ = fitted[name]
    if "random_state" not in est.get_params():
        pytest.skip(f"{name} is deterministic")
    a = clone(est).set_params(random_state=7)
    b = clone(est).set_params(random_state=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(a.fit(X, y).coef_, b.fit(X, y).coef_)


@pytest.mark.parametrize("name", IDS)
def test_predict_topk_on_every_classifier(fitted, name):
    """Top-k from the blocked scan: classes in decreasing score, the first one ``predict``'s."""
    est, X, _, _ = fitted[name]
    K = est.classes_.shape[0]
    top = est.predict_topk(X, K)
    np.testing.assert_array_equal(top[:, 0], est.predict(X))
    s = X @ est.coef_.T + (0 if est.intercept_ is None else est.intercept_)
    ranked = np.take_along_axis(s, np.searchsorted(est.classes_, top), axis=1)
    assert np.all(np.diff(ranked, axis=1) <= 0)
    np.testing.assert_array_equal(est.predict_topk(X, 1, oracle="exact"), top[:, :1])
    with pytest.raises(ValueError, match="k must"):
        est.predict_topk(X, K + 1)
