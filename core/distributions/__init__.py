"""``torch.distributions``, the part training programs use: ``Categorical``, ``Bernoulli`` and
``Normal``, with torch's sampling (the same random stream, so seeded programs draw torch's
samples), ``log_prob``, ``entropy``, shapes and argument checks."""

from __future__ import annotations

from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .normal import Normal

__all__ = ["Bernoulli", "Categorical", "Distribution", "Normal"]
