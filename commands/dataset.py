"""``hpcpolicy dataset build|inspect``: replay datasets for offline RL."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hpcpolicy.commands._click import Command
from hpcpolicy.commands._console import (
    console,
    fail_cleanly,
    is_quiet,
    note_first_compile,
    plain,
    with_progress,
)
from hpcpolicy.commands._options import (
    ClusterOpt,
    OverwriteOpt,
    ProcsFromOpt,
    ProcsOpt,
    SeedOpt,
    SiteBackfillOpt,
    SiteOpt,
    TableArg,
    WalltimeFallbackOpt,
    a_folder,
    lower_choice,
)
from hpcpolicy.commands._world import world_spec
from hpcpolicy.commands.evaluate import TrainFracOpt
from hpcpolicy.world.protocol import TRAIN_FRAC, VAL_FRAC

if TYPE_CHECKING:
    from hpcpolicy.offline.store import StoredDataset

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="Replay datasets for offline RL: build one from a "
                  "job table, inspect one.\n\n`hpcpolicy train data/NAME --algo cql` learns "
                  "from it.")


@app.command("build", cls=Command)
def build(
    table: TableArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Dataset directory to write.",
                                      show_default=False, callback=a_folder)],
    source: Annotated[str, typer.Option(
        "--source", help="logged (the real scheduler's decisions, rebuilt from the log), "
        "heuristics (rollouts of --heuristics, greedy and epsilon-random), random, or mix "
        "(all of them).", callback=lower_choice)] = "mix",
    k: Annotated[int, typer.Option("--k", help="Job slots per observation.")] = 32,
    window_size: Annotated[int, typer.Option(
        "--window-size", help="Consecutive jobs per episode.")] = 256,
    backfill: SiteBackfillOpt = None,
    reward: Annotated[str, typer.Option(
        "--reward", help="bsld, wait, response, utilization, or a mix.")] = "bsld",
    logged_action: Annotated[str, typer.Option(
        "--logged-action", help="How a logged start becomes an action: started (the slot of "
        "the job that started) or head (a job that started while the oldest waiting job did "
        "not fit is read as backfilled around it, and the action reserves the oldest job, "
        "as the environment's action under backfilling does).", callback=lower_choice)] = "started",
    heuristics: Annotated[str, typer.Option(
        "--heuristics", help="Heuristics to roll out, comma-separated.",
        callback=lower_choice)] = "fcfs,sjf,f1",
    epsilon: Annotated[float, typer.Option(
        "--epsilon", help="Chance of a random slot in the epsilon-random variants (0: none).")
    ] = 0.2,
    train_frac: TrainFracOpt = TRAIN_FRAC,
    val_frac: Annotated[float, typer.Option(
        "--val-frac", help="Share of the training windows (the latest) kept for validation.")
    ] = VAL_FRAC,
    max_windows: Annotated[int | None, typer.Option(
        "--max-windows", help="At most this many windows per part, spread evenly "
        "(default: all).")] = None,
    seed: SeedOpt = 0,
    site: SiteOpt = None,
    workers: Annotated[int, typer.Option(
        "--workers", help="Processes building windows in parallel (the dataset is the same "
        "for any number).")] = 1,
    overwrite: OverwriteOpt = False,
    cluster: ClusterOpt = None,
    procs: ProcsOpt = None,
    procs_from: ProcsFromOpt = None,
    walltime_fallback: WalltimeFallbackOpt = None,
) -> None:
    """Build a replay dataset: the log's own decisions and/or simulator rollouts.

    Windows of --window-size consecutive jobs are laid side by side over the first
    --train-frac of the jobs (train, the latest --val-frac of them validation) and over the
    rest (test, never used in training). Each window gives one episode per source. Stored as
    d3rlpy MDPDataset dumps (train.h5, validation.h5, test.h5) plus manifest.json; see
    docs/guides/offline-rl.md.

    Examples:

        hpcpolicy dataset build jobs.parquet --source logged -o data/logged

        hpcpolicy dataset build jobs.parquet --source mix --max-windows 200 --workers 2 -o data/mix
    """
    from dataclasses import replace

    from hpcpolicy.env.factory import provenance
    from hpcpolicy.offline.config import DatasetConfig
    from hpcpolicy.offline.dataset import build_dataset
    from hpcpolicy.offline.store import load_dataset, save_dataset
    from hpcpolicy.world import open_world

    with fail_cleanly():
        note_first_compile()
        cfg = DatasetConfig(source=source, k=k, window_size=window_size, reward=reward,
                            backfill=backfill or "easy", train_frac=train_frac,
                            val_frac=val_frac,
                            heuristics=tuple(h.strip() for h in heuristics.split(",")
                                             if h.strip()),
                            epsilon=epsilon, logged_action=logged_action,
                            max_windows=max_windows, seed=seed)
        from hpcpolicy.outlock import claim

        claim(out)  # before looking: no other run builds it meanwhile (ends with the command)
        if (out / "manifest.json").exists() and not overwrite:
            from hpcpolicy.errors import ConfigError

            raise ConfigError(f"{out} already holds a dataset; choose another -o or add "
                              "--overwrite")
        world = open_world(table, world_spec(cluster, procs, site, procs_from=procs_from,
                                             walltime_fallback=walltime_fallback))
        workload, machine = world.workload, world.cluster
        if site is not None:  # the episodes replay in the site model's world
            cfg = replace(cfg, world=world.env_options(), backfill=backfill or world.cfg.backfill)
        built = with_progress(lambda step: build_dataset(workload, machine, cfg, on_step=step,
                                                         workers=workers), "building")
        facts = provenance(table, cfg.env_config(), workload, machine)
        save_dataset(built, out, overwrite=overwrite, provenance={
            "training_data": facts["training_data"], "cluster": facts["cluster"],
            "workload_options": facts["workload_options"],
            "machine": {"cluster": None if cluster is None else str(cluster.resolve()),
                        "procs": procs}})
        stored = load_dataset(out)
    if is_quiet():
        console.print(plain(out), soft_wrap=True)
        return
    _show(stored)


@app.command("inspect", cls=Command)
def inspect(
    dataset: Annotated[Path, typer.Argument(help="Dataset directory (`dataset build -o`).",
                                            show_default=False, callback=a_folder)],
) -> None:
    """Print a dataset's size, episodes, action distribution and coverage.

    Example:

        hpcpolicy dataset inspect data/mix
    """
    from hpcpolicy.offline.store import load_dataset

    with fail_cleanly():
        stored = load_dataset(dataset)
    _show(stored)


def _show(stored: StoredDataset) -> None:
    from rich import box
    from rich.table import Table

    from hpcpolicy.offline.dataset import SPLIT_NAMES
    from hpcpolicy.offline.store import action_buckets

    m = stored.manifest
    size = sum(f.stat().st_size for f in stored.path.glob("*.h5"))
    cfg = m["config"]
    console.print(plain(f"{stored.path}: source {m['source']} ({', '.join(m['sources'])}); "
                  f"K {stored.k}, windows of {cfg['window_size']} jobs, backfill "
                  f"{cfg['backfill']}, reward {cfg['reward']}; {size / 2**20:,.1f} MiB"),
                  soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("split", "windows", "episodes", "decisions", "by source (episodes, "
                   "mean return)", "actions by slot"):
        table.add_column(column)
    for name in SPLIT_NAMES:
        split = m["splits"][name]
        by = "; ".join(f"{s} {v['episodes']}, {v['mean_return']:.3g}"
                       for s, v in split["by_source"].items())
        steps = max(split["steps"], 1)
        acts = ", ".join(f"{slot}: {n / steps:.0%}"
                         for slot, n in action_buckets(split["actions"], stored.k).items() if n)
        table.add_row(name, f"{len(split['windows']):,}", f"{split['episodes']:,}",
                      f"{split['steps']:,}", by, acts)
    console.print(table)
    cov: dict[str, Any] | None = m["logged_coverage"]
    if cov is not None and cov["share_inside"] is not None:
        console.print(f"logged starts inside the {stored.k} visible slots: {cov['inside']:,} of "
                      f"{cov['starts']:,} ({cov['share_inside']:.1%}); the other "
                      f"{cov['outside']:,} are kept as dynamics (the job starts between two "
                      f"decisions, like a backfilled job); windows skipped (no logged start): "
                      f"{cov['windows_skipped']}")
        if "backfilled" in cov:
            console.print(f"logged action head: {cov['backfilled']:,} starts while the oldest "
                          f"waiting job did not fit are read as backfilling (dynamics); "
                          f"{cov['reserved']:,} decisions reserve the oldest job")
    valid = m["splits"]["train"]["mean_valid_slots"]
    if valid is not None:
        console.print(f"mean valid slots per training state: {valid:.1f} of {stored.k}")
