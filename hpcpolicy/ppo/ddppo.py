"""DD-PPO: decentralised distributed PPO over torchrun workers, after CleanRL's
``ppo_atari_multigpu.py`` and Wijmans et al., "DD-PPO" (ICLR 2020).

Every worker is one process started by ``torchrun`` (``torch.distributed.run``). It reads the
run's ``launch.json``, builds its own environments, collects its own rollouts and runs the PPO
loop of :mod:`hpcpolicy.ppo.ppo`. There is no parameter server:

* all workers seed torch with the run seed, so they build identical initial weights, and rank
  0's parameters are broadcast once more to be sure;
* environment seeds and action sampling are derived from ``(seed, rank)``;
* after each minibatch's backward pass the gradients are flattened into one vector and summed
  with ``all_reduce`` (gloo on CPU, NCCL on GPU), each worker's share weighted by its number
  of samples, so every worker applies the same averaged gradient and the parameters stay
  identical (``sync_check_every`` verifies it bit for bit);
* the KL early stop uses the workers' mean KL, so all stop at the same epoch;
* only rank 0 writes files (metrics, checkpoints with every worker's RNG and environment
  state, the policy); at world size 1 it works, with a warning.

Straggler cut-off (``sync_frac`` < 1, the DD-PPO paper's preemption threshold; 0.6 there):
workers count finished rollouts in a shared counter of torch.distributed's TCP store (key per
update). After ``min_rollout_frac`` of its ``num_steps``, a worker checks the counter before
each step and stops collecting once ``ceil(sync_frac * world_size)`` workers are done. The cut
rollout is bootstrapped from the value of its last observation like any other, its
environments simply continue in the next rollout, and its gradient share is weighted by the
samples it has, so the update is the mean over all samples actually collected. An update
then holds fewer than ``world_size * num_envs * num_steps`` samples (``global_step`` counts
the real number; the column ``ddppo/workers_cut`` says how many workers were cut) and, because
the cut depends on timing, results are no longer bit-reproducible; with ``sync_frac = 1`` (the
default) they are.

Example:
    >>> from hpcpolicy.ppo.config import DDPPOConfig
    >>> cfg = DDPPOConfig(total_steps=4096, num_envs=2, num_steps=64)
    >>> launch(cfg, "rl_toy_env:make_toy_env", "runs/toy", workers=2)  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import logging
import math
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hpcpolicy.atomic import write_json
from hpcpolicy.config import read_json_object
from hpcpolicy.env.factory import ENV_FACTORY
from hpcpolicy.errors import ConfigError, HpcPolicyError
from hpcpolicy.learn.runs import RunPaths, StopOnSignal, check_resume_config, load_checkpoint
from hpcpolicy.ppo.config import DDPPOConfig, config_from_dict
from hpcpolicy.ppo.ppo import TrainResult, progress_words, run_training
from hpcpolicy.ppo.warm_start import scorer_weights

__all__ = ["LAUNCH_FILE", "PROJECT_ENV_FACTORIES", "TorchDistComm", "launch", "precheck_launch",
           "prepare_launch", "run_workers", "torchrun_command", "worker_entry", "worker_main"]

PIN_CPUS_ENV = "HPCPOLICY_PIN_CPUS"
"""Set by :func:`run_workers` for its workers: 1 pins each to CPUs of its own."""

LAUNCH_FILE = "launch.json"
"""What every worker reads: config, environment factory and its arguments, provenance."""

log = logging.getLogger("hpcpolicy.ppo.ddppo")


class TorchDistComm:
    """The :class:`~hpcpolicy.ppo.ppo.Comm` of a torchrun worker (env:// rendezvous).

    Reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` as set by
    torchrun, and joins the default process group.
    """

    def __init__(self, cfg: DDPPOConfig) -> None:
        import torch.distributed as dist

        self._dist = dist
        self.cfg = cfg
        timeout = timedelta(seconds=cfg.timeout_s)
        store, rank, world_size = next(
            dist.rendezvous("env://", timeout=timeout))  # type: ignore[attr-defined]
        self.rank, self.world_size = int(rank), int(world_size)
        store.set_timeout(timeout)
        backend = cfg.backend if cfg.backend != "auto" else (
            "nccl" if cfg.device == "cuda" else "gloo")
        if cfg.device == "cuda":
            local_rank = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local_rank)
            self.device = torch.device("cuda", local_rank)
        else:
            self.device = torch.device("cpu")
        prefix_store = dist.PrefixStore  # type: ignore[attr-defined]
        dist.init_process_group(backend, store=prefix_store("default_pg", store),
                                rank=self.rank, world_size=self.world_size, timeout=timeout)
        self._rollouts = prefix_store("hpcpolicy_rollouts", store)
        self._needed = math.ceil(cfg.sync_frac * self.world_size)
        self._min_steps = max(math.ceil(cfg.min_rollout_frac * cfg.num_steps),
                              math.ceil(cfg.num_minibatches / cfg.num_envs))
        if self.world_size == 1:
            warnings.warn("DD-PPO with a single worker exchanges nothing; it trains like "
                          "--algo ppo (use --workers 2 or more to spread the work)", stacklevel=2)

    def close(self, finished: bool) -> None:
        """Leave the process group; after a normal end, all workers leave together.

        Waiting at a barrier first (rank 0 is still exporting the policy when the others are
        done) avoids gloo tearing down a connection its peer still holds, which can abort the
        process at exit.
        """
        if finished:
            self._dist.barrier()
        self._dist.destroy_process_group()

    def all_sum(self, values: torch.Tensor) -> torch.Tensor:
        """Element-wise sum over workers."""
        out = values.to(self.device)
        self._dist.all_reduce(out)
        return out.to(values.device)

    def average_gradients(self, params: list[nn.Parameter], weight: float) -> None:
        """Sum ``weight * grad`` over workers in one flattened ``all_reduce``."""
        grads = []
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
        flat = torch.cat([g.reshape(-1) for g in grads]) * weight
        self._dist.all_reduce(flat)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()

    def keep_collecting(self, update: int, step: int) -> bool:
        """False once enough workers are done and this one has its minimum share of steps."""
        if self._needed >= self.world_size or step < self._min_steps:
            return True
        done: int = self._rollouts.add(str(update), 0)
        return done < self._needed

    def rollout_done(self, update: int) -> None:
        """Count this worker as done for ``update``; rank 0 drops the previous update's key."""
        if self._needed >= self.world_size:
            return
        self._rollouts.add(str(update), 1)
        if self.rank == 0 and update > 0:
            # every worker has passed update - 1's collectives, so nobody reads its key again
            self._rollouts.delete_key(str(update - 1))

    def gather(self, obj: dict[str, Any]) -> list[dict[str, Any]] | None:
        """Every worker's ``obj`` on rank 0 (sent as pickles between the run's own processes)."""
        out: list[Any] | None = [None] * self.world_size if self.rank == 0 else None
        self._dist.gather_object(obj, out, dst=0)
        return out

    def sync_parameters(self, module: nn.Module) -> None:
        """Broadcast rank 0's parameters and buffers."""
        for tensor in module.state_dict().values():
            self._dist.broadcast(tensor, src=0)

    def extra_metrics(self, update: int, module: nn.Module) -> dict[str, float]:
        """``sync/param_max_diff`` every ``sync_check_every`` updates."""
        every = self.cfg.sync_check_every
        if not every or update % every:
            return {}
        flat = nn.utils.parameters_to_vector(module.parameters()).detach()
        copies = [torch.empty_like(flat) for _ in range(self.world_size)]
        self._dist.all_gather(copies, flat)
        diff = max(float((c - copies[0]).abs().max()) for c in copies)
        return {"sync/param_max_diff": diff}


PROJECT_ENV_FACTORIES = frozenset({ENV_FACTORY})
"""The environment factories a worker builds when a run folder's ``launch.json`` names them:
the project's own. A run folder is data, and data must not choose the code a worker runs; any
other factory is named on the workers' command line (``--env-factory``, as :func:`launch`
does), by whoever starts them."""


def _resolve_factory(ref: str) -> Callable[..., Any]:
    """``module:function`` -> the function.

    Raises:
        ConfigError: Malformed reference, unknown module or attribute.
    """
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"environment factory {ref!r}: expected 'module:function'")
    try:
        return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"environment factory {ref!r} cannot be imported ({exc}); the module "
                          "must be importable by every worker (check PYTHONPATH)") from exc


def _trusted_factory(path: Path, ref: object, named: str | None) -> Callable[..., Any]:
    """The factory ``launch.json`` (at ``path``) names, if it is one of the project's or the one
    named on the worker's command line (``named``).

    Raises:
        ConfigError: Any other factory, before anything is imported.
    """
    if not isinstance(ref, str) or (ref not in PROJECT_ENV_FACTORIES and ref != named):
        raise ConfigError(
            f"{path}: env_factory {ref!r} is not an environment factory of hpcpolicy "
            f"({', '.join(sorted(PROJECT_ENV_FACTORIES))}), and a run folder cannot choose the "
            "code its workers run; to train on a factory of your own, name it where the "
            f"workers start: torchrun ... -m hpcpolicy.ppo.ddppo {path.parent} --env-factory "
            "MODULE:FUNCTION")
    return _resolve_factory(ref)


def prepare_launch(cfg: DDPPOConfig, env_factory: str, run_dir: str | Path, *,
                   env_kwargs: Mapping[str, Any] | None = None,
                   provenance: Mapping[str, Any] | None = None,
                   initial_policy: str | Path | None = None) -> Path:
    """Write ``run_dir/launch.json`` for workers started by any torchrun (one or many nodes).

    Args:
        cfg: The DD-PPO config.
        env_factory: ``module:function`` returning one environment, called with
            ``env_kwargs`` in every worker. Workers build one that is not in
            :data:`PROJECT_ENV_FACTORIES` only when their command line names it
            (``--env-factory``).
        run_dir: The run directory (on a file system every node sees).
        env_kwargs: JSON-ready keyword arguments of the factory.
        provenance: Recorded in the policy manifest (see :func:`hpcpolicy.ppo.ppo.train`).
        initial_policy: A policy directory whose scorer every worker starts from (see
            :mod:`hpcpolicy.ppo.warm_start`); checked here, before any worker starts.

    Returns:
        The path of ``launch.json``.
    """
    _resolve_factory(env_factory)
    if initial_policy is not None:
        initial_policy = str(Path(initial_policy).resolve())
        scorer_weights(initial_policy, cfg)
    path = Path(run_dir) / LAUNCH_FILE
    write_json(path, {"config": cfg.to_dict(), "env_factory": env_factory,
                      "env_kwargs": dict(env_kwargs or {}), "provenance": dict(provenance or {}),
                      "initial_policy": initial_policy})
    return path


def _read_launch(path: Path) -> dict[str, Any]:
    """launch.json's content, checked to have the parts :func:`prepare_launch` writes."""
    spec = read_json_object(path)
    parts = {"config": dict, "env_kwargs": dict, "provenance": dict}
    if any(not isinstance(spec.get(k), t) for k, t in parts.items()):
        raise ConfigError(f"{path}: expected an object with the objects "
                          f"{', '.join(parts)}, as prepare_launch() writes it")
    return spec


def worker_main(run_dir: str | Path, resume: bool = False,
                env_factory: str | None = None) -> TrainResult:
    """Body of one torchrun worker: read launch.json, join the group, train.

    ``env_factory`` is a factory besides the project's that launch.json may name (given on the
    worker's command line; see :data:`PROJECT_ENV_FACTORIES`).

    Raises:
        ConfigError: launch.json is missing or of another shape, does not hold a valid DD-PPO
            config, or names a factory that is neither the project's nor ``env_factory``.
    """
    path = Path(run_dir) / LAUNCH_FILE
    if not path.is_file():
        raise ConfigError(f"{path} not found; write it with prepare_launch() (or `hpcpolicy "
                          "train --algo ddppo`) before starting torchrun")
    spec = _read_launch(path)
    try:
        cfg = config_from_dict(spec["config"])
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if not isinstance(cfg, DDPPOConfig):
        raise ConfigError(f"{path}: config algo is {cfg.algo!r}, DD-PPO workers need 'ddppo'")
    make_env = functools.partial(_trusted_factory(path, spec.get("env_factory"), env_factory),
                                 **spec["env_kwargs"])
    comm = TorchDistComm(cfg)
    progress = None
    if comm.rank == 0:
        def progress(row: Mapping[str, float]) -> None:
            log.info("update %d  steps %d  %.0f steps/s  %s", row["update"],
                     row["global_step"], row["sps"], progress_words(row))
    finished = False
    try:
        initial = spec.get("initial_policy")
        result = run_training(cfg, make_env, run_dir, comm, comm.device, resume=resume,
                              provenance=spec["provenance"], progress=progress,
                              initial_scorer=None if initial is None or resume
                              else scorer_weights(initial, cfg))
        finished = True
        return result
    finally:
        comm.close(finished)


def precheck_launch(cfg: DDPPOConfig, paths: RunPaths, workers: int, resume: bool) -> None:
    """Check, before starting workers, what the user can fix (so no worker fails on it)."""
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    if not resume:
        paths.check_new()
        return
    ckpt = load_checkpoint(paths.checkpoint)
    check_resume_config(ckpt["config"], cfg, paths.resumable_changes())
    if len(ckpt["workers"]) != workers:
        raise ConfigError(f"{paths.checkpoint} was written by {len(ckpt['workers'])} worker(s); "
                          f"resume with --workers {len(ckpt['workers'])}")


def launch(cfg: DDPPOConfig, env_factory: str, run_dir: str | Path, *, workers: int,
           env_kwargs: Mapping[str, Any] | None = None,
           provenance: Mapping[str, Any] | None = None, resume: bool = False,
           initial_policy: str | Path | None = None) -> TrainResult:
    """Run DD-PPO with ``workers`` processes on this machine (``torchrun --standalone``).

    Workers inherit this process's environment; ``OMP_NUM_THREADS`` is set to
    ``cfg.torch_threads``. Ctrl-C or SIGTERM to this process (or a ``STOP`` file in
    ``run_dir``) makes the workers finish the current update, checkpoint and exit, and this
    function returns with ``interrupted`` set; a second Ctrl-C terminates them.

    Args:
        cfg: The DD-PPO config; ``total_steps`` is the budget over all workers.
        env_factory: ``module:function`` building one environment (see :func:`prepare_launch`).
        run_dir: The run directory.
        workers: Number of worker processes.
        env_kwargs: Keyword arguments of the factory.
        provenance: Recorded in the policy manifest.
        resume: Continue from the run's last checkpoint (same number of workers).
        initial_policy: Start the policy from this policy directory's scorer (not on resume:
            the checkpoint has the weights).

    Returns:
        The :class:`~hpcpolicy.ppo.ppo.TrainResult` rank 0 recorded.

    Raises:
        ConfigError: Bad factory, existing run without ``resume``, or a mismatching resume.
        RuntimeError: A worker failed (its traceback is in the output above).
    """
    paths = RunPaths(run_dir)
    precheck_launch(cfg, paths, workers, resume)
    prepare_launch(cfg, env_factory, run_dir, env_kwargs=env_kwargs, provenance=provenance,
                   initial_policy=None if resume else initial_policy)
    (paths.root / "result.json").unlink(missing_ok=True)
    return run_workers("hpcpolicy.ppo.ddppo", paths, workers, cfg, resume, "DD-PPO",
                       env_factory=None if env_factory in PROJECT_ENV_FACTORIES else env_factory)


def torchrun_command(module: str, run_dir: Path, workers: int, resume: bool,
                     env_factory: str | None = None) -> list[str]:
    """``torchrun --standalone`` of ``python -m MODULE RUN_DIR [--resume] [--env-factory REF]``
    on ``workers`` processes on this machine (a free port of its own, so several can run at
    once)."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={workers}", "-m", module, str(run_dir),
            *(["--resume"] if resume else []),
            *(["--env-factory", env_factory] if env_factory is not None else [])]


def _stop_now(torchrun: subprocess.Popen[bytes]) -> None:
    """End torchrun and its workers at once and quietly (the last checkpoint stays usable).

    torchrun starts each worker in a session of its own, so the workers are found as its
    children (Linux's ``/proc``) and killed with it. Where they cannot be found, torchrun is
    asked to stop them (it then prints a traceback of its own).
    """
    try:
        tasks = Path(f"/proc/{torchrun.pid}/task").iterdir()
        workers = [int(pid) for task in tasks for pid in (task / "children").read_text().split()]
    except OSError:
        workers = []
    if not workers:
        torchrun.terminate()
        torchrun.wait()
        return
    torchrun.kill()
    torchrun.wait()
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.01)  # a SIGKILL takes effect when the process is next scheduled


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not ended (a zombie has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def run_workers(module: str, paths: RunPaths, workers: int, cfg: DDPPOConfig, resume: bool,
                what: str, env_factory: str | None = None) -> TrainResult:
    """``torchrun --standalone`` of ``python -m MODULE RUN_DIR [--resume]`` on ``workers``
    processes (``cfg.torch_threads`` threads each, pinned under ``cfg.pin_cpus``), and the
    :class:`~hpcpolicy.ppo.ppo.TrainResult` rank 0 wrote. ``env_factory``: a factory besides
    the project's that the workers may build (see :func:`torchrun_command`).

    Raises:
        RuntimeError: a worker failed, or wrote no result (``what`` names the trainer).
    """
    cmd = torchrun_command(module, paths.root, workers, resume, env_factory)
    paths.stop_request.unlink(missing_ok=True)  # left by a run that crashed
    # torchrun in a session of its own: a terminal's Ctrl-C reaches only this process, which
    # asks the workers to stop through the run's STOP file (torchrun, signalled, would print
    # a traceback and leave the workers' exit to its own timeouts)
    proc = subprocess.Popen(cmd, env={**os.environ, "OMP_NUM_THREADS": str(cfg.torch_threads),
                                      PIN_CPUS_ENV: "1" if cfg.pin_cpus else "0"},
                            start_new_session=True)
    try:
        with StopOnSignal() as stop:
            while (code := proc.poll()) is None:
                if stop.requested and not paths.stop_request.exists():
                    paths.stop_request.touch()
                time.sleep(0.1)
    except KeyboardInterrupt:  # a second Ctrl-C: stop the workers now
        _stop_now(proc)
        raise
    finally:
        paths.stop_request.unlink(missing_ok=True)
    result_file = paths.root / "result.json"
    if code != 0 or not result_file.is_file():
        raise RuntimeError(f"{what} workers failed (torchrun exit code {code}); see their "
                           f"output above. The last checkpoint, if any, is {paths.checkpoint}")
    data = read_json_object(result_file)
    return TrainResult(**{**data, "run_dir": Path(data["run_dir"])})


def pin_to_own_cpus() -> None:
    """Restrict this torchrun worker to CPUs of its own: ``OMP_NUM_THREADS`` of those it may
    use, the block at its ``LOCAL_RANK``. Nothing happens for a lone worker (nobody waits for
    it, and the OS may move it off a busy core), where the workers would not each get their
    own, or where the OS cannot pin (not Linux)."""
    if not hasattr(os, "sched_setaffinity"):
        return
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    workers = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    cpus = sorted(os.sched_getaffinity(0))
    if workers > 1 and workers * threads <= len(cpus):
        os.sched_setaffinity(0, cpus[rank * threads:(rank + 1) * threads])


def worker_entry(module: str, description: str, main: Callable[..., Any],
                 argv: list[str] | None = None, *, env_factory_option: bool = False) -> None:
    """``python -m MODULE RUN_DIR [--resume]``, started by torchrun: run ``main(run_dir,
    resume=...)`` (with ``env_factory=`` the ``--env-factory`` option, where there is one),
    then end the process at once. An error the user can fix is one line on stderr, exit 1."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument("run_dir", help="run directory holding launch.json")
    parser.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    if env_factory_option:
        parser.add_argument("--env-factory", metavar="MODULE:FUNCTION", help="an environment "
                            "factory of your own that launch.json may name (besides "
                            "hpcpolicy's)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if os.environ.get(PIN_CPUS_ENV) == "1":
        pin_to_own_cpus()
    extra = {"env_factory": args.env_factory} if env_factory_option else {}
    try:
        main(args.run_dir, resume=args.resume, **extra)
    except HpcPolicyError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)
    # Every output is written and the group is left: end now. On a loaded machine the
    # interpreter's own shutdown can still catch a gloo thread mid-teardown and abort the
    # process ("terminate called without an active exception"), failing a finished run.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _main(argv: list[str] | None = None) -> None:
    """``python -m hpcpolicy.ppo.ddppo RUN_DIR [--resume] [--env-factory MODULE:FUNCTION]``: one
    worker, started by torchrun."""
    worker_entry("hpcpolicy.ppo.ddppo", "One DD-PPO worker; start it with torchrun.",
                 worker_main, argv, env_factory_option=True)


if __name__ == "__main__":
    _main()
