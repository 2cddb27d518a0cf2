"""xclib: the companion library of the book *Softmax at scale*.

Not to be confused with ``pyxclib`` (kunaldahiya/pyxclib), which also imports as ``xclib``;
this one has ``xclib.__book__ == "Softmax at scale"``.
"""
from .base import DivergenceWarning, IterativeSoftmaxEstimator, LinearSoftmaxClassifier
from .exact import SoftmaxRegression

__version__ = "0.1.0"
__book__ = "Softmax at scale"

__all__ = [
    "DivergenceWarning",
    "IterativeSoftmaxEstimator",
    "LinearSoftmaxClassifier",
    "SoftmaxRegression",
]
