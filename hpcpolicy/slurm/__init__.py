"""Working with a live Slurm through its own commands: submit a scaled trace window
(:mod:`~hpcpolicy.slurm.submit`), read the queue (:mod:`~hpcpolicy.slurm.queue`) and rank it
with a policy (:mod:`~hpcpolicy.slurm.advise`)."""
