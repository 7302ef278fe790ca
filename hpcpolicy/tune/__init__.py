"""Population-based training (Jaderberg et al. 2017) of PPO / DD-PPO runs: ``hpcpolicy tune``.

A population of ordinary training runs learns side by side in synchronous rounds. After each
round every member is scored on validation windows cut from the end of the training part;
the worst quantile copies the weights and optimiser state of a random member of the best
quantile and perturbs its learning rate, entropy and clip coefficients by x0.8 or x1.25. The
best member's policy is the tune's result.

Modules:

* :mod:`~hpcpolicy.tune.config`: ``TuneConfig`` (population, budget, rounds, selection);
* :mod:`~hpcpolicy.tune.pbt`: exploit/explore and the initial population, pure functions;
* :mod:`~hpcpolicy.tune.validation`: the validation part and how members are scored;
* :mod:`~hpcpolicy.tune.record`: the tune directory, tune.json and tune.csv;
* :mod:`~hpcpolicy.tune.member`: one member's round of training, shared by both backends;
* :mod:`~hpcpolicy.tune.runner`: ``tune(...)``, the rounds, resumable at any point;
* :mod:`~hpcpolicy.tune.on_ray`: ``tune_on_ray(...)``, the members as trials of Ray Tune's
  PBT scheduler (``--backend ray``; imported only then, since it imports Ray).
"""

from __future__ import annotations

from hpcpolicy.tune.config import TuneConfig
from hpcpolicy.tune.runner import TuneEvent, TuneResult, tune

__all__ = ["TuneConfig", "TuneEvent", "TuneResult", "tune"]
