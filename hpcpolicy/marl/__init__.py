"""The two-agent scheduler: a selector picks the job, an allocator picks its GPUs.

Both agents are small per-option scorers trained together with PPO on one shared reward
(bounded slowdown and GPU utilisation), in the node-level GPU engine
(:class:`~hpcpolicy.sim.gpu_engine.GpuEngine`), and exported as one artifact that
``simulate``, ``evaluate`` and ``whatif`` accept as a policy path::

    hpcpolicy train gpu.parquet --algo marl --cluster examples/gpu-partition.toml -o runs/m
    hpcpolicy evaluate gpu.parquet --cluster examples/gpu-partition.toml --gpu-baselines \\
        -p runs/m/policy

Modules, in the order a decision flows through them:

* :mod:`~hpcpolicy.marl.features`: what each agent sees (job slots; candidate placements);
* :mod:`~hpcpolicy.marl.decide`: one select + allocate decision in the engine (the rules);
* :mod:`~hpcpolicy.marl.networks`: the two actor-critics;
* :mod:`~hpcpolicy.marl.reward`: the shared reward;
* :mod:`~hpcpolicy.marl.episode`: training episodes, the engine run with sampling agents;
* :mod:`~hpcpolicy.marl.train`: cooperative PPO; :mod:`~hpcpolicy.marl.distributed`: its
  DD-PPO workers; :mod:`~hpcpolicy.marl.session`: from a job table, as ``train`` calls it,
  with :mod:`~hpcpolicy.marl.data` naming that table;
* :mod:`~hpcpolicy.marl.config`: ``MarlConfig``, ``MarlEnvConfig``;
* :mod:`~hpcpolicy.marl.artifact`: export (loaded back by :mod:`hpcpolicy.deploy.marl`).

Importing this package imports nothing heavy.
"""

from __future__ import annotations

__all__: list[str] = []
