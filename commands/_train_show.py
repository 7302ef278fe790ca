"""What ``hpcpolicy train`` shows: the progress line while training and the summary after."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from hpcpolicy.commands._console import console, err_console

if TYPE_CHECKING:
    from hpcpolicy.training import Trained, TrainProgress

__all__ = ["SHOWN", "SUMMARIES", "ProgressLine", "show_card"]

SHOWN = (("charts/episodic_return", "return", "{:.4g}".format),
         ("env/bsld", "bsld", "{:.2f}".format),
         ("env/best_heuristic_bsld", "best heuristic", "{:.2f}".format),
         # bsld / best bsld, shown as evaluate's "vs best": a change, negative is better
         ("env/bsld_vs_best", "vs best", lambda ratio: f"{ratio - 1:+.1%}"))
"""Metrics shown while training and in the summary: column, label, formatter."""
STOPPED = "stopped before the budget was spent; continue with the same command and --resume"


def _format(row: Mapping[str, float]) -> str:
    """The metrics of an update's row, or that no episode ended in it (never ``nan``)."""
    from hpcpolicy.ppo.ppo import NO_EPISODE

    if "charts/episodes" in row and not row["charts/episodes"]:
        return NO_EPISODE
    parts = [f"{label} {fmt(row[key])}" for key, label, fmt in SHOWN
             if key in row and row[key] == row[key]]
    return "  ".join(parts)


class ProgressLine:
    """A transient progress line on stderr, shown from the trainer's first report on (none
    when not ``enabled``): the phase, speed and metrics, a bar, done/total, elapsed time."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> ProgressLine:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, event: TrainProgress) -> None:
        """Show ``event``."""
        if not self.enabled:
            return
        if self._bar is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(),
                                 console=err_console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task(event.phase, total=None)
        label = [event.unit]
        if event.row is not None:
            if "sps" in event.row:
                label.append(f"{event.row['sps']:,.0f} steps/s")
            label.append(_format(event.row))
        self._bar.update(self._task, description=f"{event.phase} {'  '.join(label)}",
                         completed=event.done, total=event.total)


def _latest(metrics_csv: Path) -> dict[str, float]:
    """The last value of each metric in a run's metrics.csv (episodes do not end every update)."""
    import csv

    latest: dict[str, float] = {}
    with metrics_csv.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            latest.update({k: float(v) for k, v in row.items() if v != ""})
    return latest


def _online(trained: Trained) -> None:
    from rich import box
    from rich.table import Table

    result = trained.result
    out = Table(box=box.SIMPLE_HEAD, show_header=False, pad_edge=False)
    out.add_column(style="bold")
    out.add_column()
    row = _latest(result.run_dir / "metrics.csv")
    out.add_row("run", str(result.run_dir))
    out.add_row("steps", f"{result.global_step:,} in {result.updates:,} updates, "
                         f"{result.wall_time_s:,.1f} s")
    for key, label, fmt in SHOWN:
        if key in row:
            out.add_row(f"last {label}", fmt(row[key]))
    out.add_row("policy", str(trained.policy))
    console.print(out)
    if result.interrupted:
        console.print(STOPPED)


def show_card(card: Mapping[str, Any]) -> None:
    """The model card: the test-split scores, the training period and the warning."""
    from rich import box
    from rich.table import Table

    period = card["period"]
    console.print(f"model card (card.json): trained on "
                  f"{card['training_data']['path']}, jobs {period['jobs'][0]:,}.."
                  f"{period['jobs'][1] - 1:,} submitted {period['from']} .. {period['to']} "
                  f"({period['part']})" + (f", starting from {card['prior']} (--prior)"
                                            if card.get("prior") else ""),
                  markup=False, soft_wrap=True)
    selection = card.get("selection")
    if selection is not None:
        console.print(f"deployed: {selection['chosen']} of {len(selection['candidates'])} "
                      "candidates (final policy and snapshots), the best on the validation "
                      "windows", markup=False, soft_wrap=True)
    val, guard = card.get("validation"), card["guard"]
    if val is not None and guard is not None:
        d = val["decision"]
        bound = "n/a" if d["upper_bound"] is None else f"{d['upper_bound']:+.2f}"
        console.print(f"validation (jobs {val['jobs'][0]:,}..{val['jobs'][1] - 1:,}, "
                      f"{d['windows']} window(s)): policy - {guard['fallback']} mean bsld "
                      f"{d['mean_difference']:+.2f}, {d['confidence']:.0%} upper bound {bound}: "
                      + ("the policy is deployed" if d["deploy"] else
                         f"the guard deploys {guard['fallback']}"), markup=False, soft_wrap=True)
    test = card["test"]
    if test is None:
        console.print(f"no test comparison: {card['skipped']}", markup=False, soft_wrap=True)
        if card["warning"]:
            console.print(f"warning: {card['warning']}", markup=False, soft_wrap=True)
        return
    out = Table(title=f"test split, backfill {test['backfill']}: mean bsld over "
                f"{len(test['starts'])} window(s) of {test['window_size']} jobs",
                title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for name in ("policy", "mean bsld", "std", "min", "max"):
        out.add_column(name, justify="left" if name == "policy" else "right")
    for row in sorted(test["scores"], key=lambda r: r["mean_bsld"]):
        label = "trained" if row["kind"] == "learned" else row["policy"]
        out.add_row(label, *(f"{row[k]:.2f}" for k in ("mean_bsld", "std", "min", "max")))
    console.print(out)
    if card["warning"]:
        console.print(f"warning: {card['warning']}", markup=False, soft_wrap=True)
    console.print(f"same windows: {test['evaluate']}", markup=False, soft_wrap=True)


def _offline(trained: Trained) -> None:
    result, tuned = trained.result, trained.finetuned
    metrics = result.last_metrics
    shown = "; ".join(f"{name} {metrics[key]:.3f}" for key, name in (
        ("val_action_match", "validation action match"),
        ("test_action_match", "test action match")) if key in metrics)
    console.print(f"{result.steps:,} steps in {result.wall_time_s:,.1f} s; {shown}")
    console.print(f"policy: {result.policy}", markup=False)
    if tuned is not None:
        console.print(f"fine-tuned with PPO ({tuned.global_step:,} steps): "
                      f"{tuned.run_dir / 'policy'}", markup=False)


def _marl(trained: Trained) -> None:
    result = trained.result
    console.print(f"{result.global_step:,} decisions in {result.updates:,} updates, "
                  f"{result.wall_time_s:,.1f} s; last {_format(result.last_metrics)}")
    if result.interrupted:
        console.print(STOPPED)
    console.print(f"policy: {trained.policy}", markup=False)


def _gpu(trained: Trained) -> None:
    result = trained.result
    shown = ", ".join(f"{k} {v:,.4g}" for k, v in result.last_metrics.items())
    console.print(f"{result.steps:,} steps, {result.wall_time_s:,.1f} s; last 10 episodes: "
                  f"{shown}")
    console.print(f"policy: {result.policy}", markup=False)


def _with_next_step(summary: Callable[[Trained], None]) -> Callable[[Trained], None]:
    """``summary``, then the command that compares the policy with the heuristics."""
    def show(trained: Trained) -> None:
        summary(trained)
        console.print(f"compare it: {trained.evaluate}", markup=False)
    return show


SUMMARIES: dict[str, Callable[[Trained], None]] = {
    route: _with_next_step(summary) for route, summary in
    (("online", _online), ("offline", _offline), ("marl", _marl), ("gpu", _gpu))}
"""Route of :class:`~hpcpolicy.training.Trained` -> what the command prints after training."""
