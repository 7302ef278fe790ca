"""Heterogeneous GPUs: learn which GPU type (generation) each job should start on.

The task: jobs start in FCFS order on the node-level GPU engine
(:class:`~hpcpolicy.sim.gpu_engine.GpuEngine`); when a job can start on several GPU types, a
chooser picks one, and the job runs for its logged time scaled by the speed of the type it
got. The reward is ADLRO's, -(job completion time + lambda * idle GPU time).

* :mod:`~hpcpolicy.hetero.observe` what the chooser sees, and type -> placement;
* :mod:`~hpcpolicy.hetero.reward` the ADLRO terms, measured between decisions;
* :mod:`~hpcpolicy.hetero.stepping` the engine paused at every decision;
* :mod:`~hpcpolicy.hetero.env` the Gymnasium environment;
* :mod:`~hpcpolicy.hetero.qnet`, :mod:`~hpcpolicy.hetero.networks` the Q-network (torch) and
  its d3rlpy adapters;
* :mod:`~hpcpolicy.hetero.train` online (double) DQN with d3rlpy;
* :mod:`~hpcpolicy.hetero.export` the deployable artifact (ONNX/TorchScript + manifest),
  loaded back by :mod:`hpcpolicy.deploy.gpu_type`;
* :mod:`~hpcpolicy.hetero.policy` the rule-based GPU-type choosers the trained policy is
  compared with (and builds on).

``hpcpolicy train jobs.parquet --algo dqn --cluster examples/gpu-partition.toml --lambda 0.5``
trains; ``hpcpolicy simulate jobs.parquet --policy runs/NAME/policy --cluster ...`` replays.
"""

from hpcpolicy.hetero.config import ALGO, GpuDqnConfig

__all__ = ["ALGO", "GpuDqnConfig"]
