"""The bookkeeping of :meth:`xclib.base.IterativeSoftmaxEstimator.fit`'s epoch loop: the
divergence rules (:class:`Watch`), the stopping rule (:class:`StopRule`), the warnings of a
fit that learned nothing, and the fitted attributes at the end (:func:`finish_fit`)."""
from __future__ import annotations

import warnings
from numbers import Real

import numpy as np
from sklearn.exceptions import ConvergenceWarning

#: Columns of ``history_`` (one entry per completed epoch; ``eval_*`` are NaN without eval_set).
HISTORY_KEYS = ("epoch", "time", "train_loss", "train_error", "eval_loss", "eval_error")


class DivergenceWarning(RuntimeWarning):
    """A fit stopped because its loss blew up: it became non-finite, or it stayed above
    ``IterativeSoftmaxEstimator._divergence_factor`` times its starting value (see there)."""


def diverge(est, epoch, why, stacklevel=3):
    """Declare ``est``'s fit diverged in round ``epoch``: ``diverged_`` and a warning."""
    est.diverged_ = True
    warnings.warn(
        f"{type(est).__name__} diverged in round {epoch + 1} ({why}; typically a "
        "learning rate too large); keeping the weights with the lowest loss seen",
        DivergenceWarning, stacklevel=stacklevel)


def record_round(est, epoch, elapsed, loss, err, eval_loss, eval_err):
    """Append the entry of the round whose last epoch is ``epoch`` to ``est.history_``."""
    for key, val in zip(HISTORY_KEYS, (epoch + 1, elapsed, loss, err, eval_loss, eval_err)):
        est.history_[key].append(float(val) if key != "epoch" else int(val))
    est.n_epochs_ = epoch + 1


class Watch:
    """The divergence rules of one fit (:class:`~xclib.base.IterativeSoftmaxEstimator`,
    *Divergence*): the loss ``L0`` at the starting weights, the limit
    ``_divergence_factor · max(|L0|, 1)``, the rounds in a row above it, and the weights of
    the round with the lowest loss."""

    def __init__(self, est, start_loss, best):
        self.est, self.best = est, best
        self.start_loss = self.best_loss = start_loss
        self.limit = est._divergence_factor * max(abs(start_loss), 1.0) \
            if np.isfinite(start_loss) else np.inf
        self.first_above, self.above = None, 0

    def diverged(self, epoch, loss, last):
        """Whether round ``epoch`` (the last of the fit when ``last``), whose loss is
        ``loss``, ends the fit as diverged (:func:`diverge` warns)."""
        est = self.est
        if not np.isfinite(loss):
            diverge(est, epoch, "non-finite weights or loss", stacklevel=4)
            return True
        self.above = self.above + 1 if loss > self.limit else 0
        if self.above and self.first_above is None:
            self.first_above = epoch
        if self.above and (self.above >= est._divergence_patience or last):
            diverge(est, epoch, f"loss {loss:.4g} above {self.limit:.4g} "
                                f"({est._divergence_factor:g}× its start) "
                                f"for {self.above} round(s)", stacklevel=4)
            return True
        return False

    def keep(self, state, coef, intercept, loss):
        """Keep the round's weights if its loss is the lowest so far."""
        if loss <= self.best_loss or not np.isfinite(self.best_loss):
            self.best, self.best_loss = self.est._keep_best(state, coef, intercept), loss

    def settle(self, y):
        """At the end of a fit that did not diverge: the warnings of a fit that learned
        nothing (its loss never below its start, or no better than the majority class)."""
        est = self.est
        if est.diverged_ or not est.n_epochs_:
            return
        if not self.best_loss < self.start_loss:
            no_progress(est, self.start_loss, self.first_above, self.limit,
                        any(v != self.start_loss for v in est.history_["train_loss"]))
        else:
            warn_if_collapsed(est, y, self.start_loss)


def no_progress(est, start_loss, first_above, limit, moved):
    """A fit whose loss never went below its start: diverged if some round blew up (the
    weights swung between a blow-up and the start); else a warning, which says whether the
    weights moved at all (or collapsed back to the start)."""
    if first_above is not None:
        diverge(est, first_above, f"loss above {limit:.4g} ({est._divergence_factor:g}× its "
                                  f"start) and never below its start {start_loss:.4g}",
                     stacklevel=5)
    elif moved:
        warn_collapse(est, f"its training loss never went below its value at the starting "
                           f"weights ({start_loss:.4g})")
    else:
        warnings.warn(
            f"{type(est).__name__}: in {est.n_epochs_} round(s) the training loss stayed "
            f"exactly at its value at the starting weights ({start_loss:.4g}): the weights did "
            "not move, or collapsed back to zero (typically a learning rate so large that the "
            "ridge's proximal shrink wipes out the rows each step touches, or a ridge alpha "
            "that dominates features this small)",
            ConvergenceWarning, stacklevel=4)


def finish_fit(est, state, best, stop, n_rounds):
    """The fitted attributes at the end of :meth:`IterativeSoftmaxEstimator.fit`: the weights
    (the best ones if it diverged) in the units of X, ``row_scale_``, ``learning_rate_``; the
    warning of a fit whose budget ran out before the loss settled."""
    if est.diverged_:
        est.coef_, est.intercept_ = best
    else:
        est.coef_, est.intercept_ = copy_weights(*est._coef(state))
    if est._fit_scale != 1.0:
        est.coef_ = est.coef_ / est._fit_scale  # W = V / s
    est.row_scale_ = est._fit_scale
    if isinstance(est._fit_step, Real):
        est.learning_rate_ = float(est._fit_step) / est._fit_scale / est._fit_scale
    est._finalize(state)
    est.n_step_cuts_ = int(getattr(est, "_fit_cuts", 0))
    for name in ("_fit_scale", "_fit_step", "_fit_cuts"):  # a fitted model holds fitted
        if hasattr(est, name):                              # attributes only
            delattr(est, name)
    if not est.diverged_ and stop is not None and stop.tol is not None \
            and not stop.converged and len(est.history_["epoch"]) == n_rounds:
        warnings.warn(
            f"{type(est).__name__} ran all {est.n_epochs_} epochs before its training loss "
            f"settled (the last {est.n_iter_no_change} did not all fail to lower it by "
            f"tol={est.tol:g}); raise n_epochs, or pass tol=None to run a fixed number of "
            "epochs", ConvergenceWarning, stacklevel=3)


class StopRule:
    """*Stopping*: scikit-learn's rule (``SGDClassifier``): the fit stops once the training
    loss of ``n_iter_no_change`` consecutive epochs failed to fall below the lowest loss seen
    before them minus ``tol``; ``tol=None`` runs every epoch. With ``cuts`` (the adaptive
    schedule, :class:`StepCuts`) such a stall first cuts the step, and stops the fit only
    when the cuts run out."""

    def __init__(self, est, cuts=None):
        self.tol = None if est.tol is None else float(est.tol)
        self.patience = int(est.n_iter_no_change)
        self.cuts = cuts
        self.best, self.count, self.converged = np.inf, 0, False

    def done(self, loss):
        if self.tol is None:
            return False
        self.count = self.count + 1 if loss > self.best - self.tol else 0
        self.best = min(self.best, loss)
        if self.count >= self.patience and self.cuts is not None and self.cuts.cut():
            self.count = 0
        self.converged = self.count >= self.patience
        return self.converged


#: the most cuts of ``decay="adaptive"`` (the last step is step₀ / 5⁴ = step₀ / 625)
MAX_CUTS = 4


class StepCuts:
    """The cuts of ``decay="adaptive"`` (:meth:`xclib.steps.StepRules._step_at`): the count
    lives on the estimator as ``_fit_cuts`` (read by ``_step_at``), and a round whose loss blew
    up puts back the weights of the lowest loss (:meth:`recover`)."""

    def __init__(self, est):
        self.est = est
        est._fit_cuts = 0

    def cut(self):
        """One more cut, or False when :data:`MAX_CUTS` are spent."""
        if self.est._fit_cuts >= MAX_CUTS:
            return False
        self.est._fit_cuts += 1
        return True

    def recover(self, state, X, y, watch, loss):
        """After a round of loss ``loss``: when it is non-finite or above twice the lowest
        loss so far, put back the weights of that lowest loss (and the per-row variables
        at their optimum for them) with the step cut, and return True; False when the round
        did not blow up, or the cuts are spent (the divergence rules then apply)."""
        blown = not np.isfinite(loss) or loss > 2.0 * max(watch.best_loss, 0.0) + 1e-12
        if not blown or not np.isfinite(watch.best_loss) or not self.cut():
            return False
        est = self.est
        est._set_weights(state, *watch.best)
        est._warm_rows(state, X, y)
        return True


def warn_if_collapsed(est, y, start_loss):
    """*No silent collapse*: a fit whose loss went below its start still warns when its final
    loss is no better than the start, or when it predicts the training rows no better than
    always answering the most frequent class (on at least 10 rows a class)."""
    losses, errors = est.history_["train_loss"], est.history_["train_error"]
    majority = float(np.bincount(y).max()) / y.shape[0]
    accuracy = 1.0 - errors[-1]
    if losses[-1] >= start_loss:
        warn_collapse(est, f"its final training loss {losses[-1]:.4g} is no better than at "
                            f"the starting weights ({start_loss:.4g})")
    elif accuracy <= majority < 1.0 and y.shape[0] >= 10 * est.classes_.shape[0]:
        warn_collapse(est, f"its training accuracy {accuracy:.3f} is no better than always "
                            f"predicting the most frequent class ({majority:.3f})")


def warn_collapse(est, why):
    warnings.warn(f"{type(est).__name__} learned nothing useful: {why}. Typically the step "
                  "is too large or too small for these features (learning_rate='auto' "
                  "derives it from the rows), or the ridge alpha is too large",
                  ConvergenceWarning, stacklevel=5)


def divide_rows(X, s):
    """``X / s`` for a power of two ``s`` (exact), or ``X`` itself when s = 1."""
    if s == 1.0:
        return X
    X = X.copy()
    X.data *= 1.0 / s
    return X


def finite(coef, intercept):
    return bool(np.all(np.isfinite(coef))) and (
        intercept is None or bool(np.all(np.isfinite(intercept)))
    )


def copy_weights(coef, intercept):
    return np.array(coef, copy=True), None if intercept is None else np.array(intercept)


def progress_bar(total, desc, verbose):
    if not verbose:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="epoch")
