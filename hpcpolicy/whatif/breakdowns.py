"""Who wins and who loses: a comparison broken down by user, partition, job size and run time.

Both replays hold the same jobs in the same order, so the two outcome tables are put side by
side row by row and grouped. Size classes are by processors (:data:`SIZE_CLASSES`), run-time
classes by the logged run time (:data:`RUNTIME_CLASSES`). For users and partitions only the
:data:`TOP` biggest losers and winners by change of mean wait are kept (losers first); the
classes are all kept, in order.

A group is a *notable loser* (:func:`notable_losers`) when it has at least
:data:`MIN_GROUP_JOBS` jobs and its mean wait rises by at least :data:`LOSS_REL` and
:data:`LOSS_ABS_S`; these are the trade-offs a report must not hide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import polars as pl

__all__ = ["CANDIDATE_COLUMNS", "COLUMNS", "GROUPINGS", "LOSS_ABS_S", "LOSS_REL",
           "MIN_GROUP_JOBS", "RUNTIME_CLASSES", "SIZE_CLASSES", "TOP", "group_changes",
           "notable_losers"]

SIZE_CLASSES = ((1, "1 core"), (4, "2-4 cores"), (16, "5-16 cores"), (64, "17-64 cores"),
                (256, "65-256 cores"), (None, "257+ cores"))
"""(upper bound inclusive, label) of the job-size classes."""
RUNTIME_CLASSES = ((600, "< 10 min"), (3600, "10 min - 1 h"), (4 * 3600, "1 - 4 h"),
                   (12 * 3600, "4 - 12 h"), (86400, "12 - 24 h"), (None, "> 1 day"))
"""(upper bound exclusive, label) of the run-time classes (s)."""
GROUPINGS = ("user", "partition", "size_class", "runtime_class")
COLUMNS = ("user", "partition", "procs", "run", "wait", "bsld")
"""The outcome columns :func:`group_changes` reads of the baseline."""
CANDIDATE_COLUMNS = ("wait", "bsld")
"""The outcome columns it reads of the candidate (the groups are the baseline's)."""
TOP = 10
MIN_GROUP_JOBS = 20
LOSS_REL = 0.25
LOSS_ABS_S = 600.0


def _classes(column: str, bounds: tuple[tuple[int | None, str], ...],
             inclusive: bool) -> pl.Expr:
    import polars as pl

    expr: Any = None
    for bound, label in bounds:
        if bound is None:
            expr = expr.otherwise(pl.lit(label)) if expr is not None else pl.lit(label)
            break
        test = pl.col(column) <= bound if inclusive else pl.col(column) < bound
        expr = pl.when(test).then(pl.lit(label)) if expr is None else \
            expr.when(test).then(pl.lit(label))
    return expr  # type: ignore[no-any-return]


def group_changes(base: pl.DataFrame, cand: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Per grouping: name, jobs, both runs' mean wait and mean bsld, and the changes.

    Sums run in numpy, in job order, so the same runs give the same bits every time (a
    parallel group-by does not promise that for floating-point means).

    Args:
        base, cand: outcome tables of the same jobs in the same order: at least
            :data:`COLUMNS` of the baseline and :data:`CANDIDATE_COLUMNS` of the candidate.
    """
    import numpy as np
    import polars as pl

    side = pl.DataFrame({
        "user": base["user"], "partition": base["partition"],
        "procs": base["procs"], "run_s": base["run"],
        "bw": base["wait"], "cw": cand["wait"], "bb": base["bsld"], "cb": cand["bsld"],
    }).filter(pl.col("bw").is_not_null() & pl.col("cw").is_not_null()).with_columns(
        _classes("procs", SIZE_CLASSES, inclusive=True).alias("size_class"),
        _classes("run_s", RUNTIME_CLASSES, inclusive=False).alias("runtime_class"),
    )
    # each measured column as float once, for the four groupings
    measured = {c: side[c].to_numpy().astype(np.float64) for c in _MEASURED}
    out: dict[str, list[dict[str, Any]]] = {}
    for by in GROUPINGS:
        table = _means(side[by], measured)
        if by in ("size_class", "runtime_class"):
            labels = [label for _, label in (SIZE_CLASSES if by == "size_class"
                                             else RUNTIME_CLASSES)]
            table = table.with_columns(
                pl.col("name").replace_strict(labels, list(range(len(labels)))).alias("_o")
            ).sort("_o").drop("_o")
        else:
            table = _extremes(table)
        out[by] = [_row(r) for r in table.iter_rows(named=True)]
    return out


_MEASURED = ("bw", "cw", "bb", "cb")
"""The side-by-side columns averaged per group: both runs' wait, then both runs' bsld."""


def _means(by: pl.Series, measured: dict[str, npt.NDArray[np.float64]]) -> pl.DataFrame:
    """Jobs and mean of each measured column per value of ``by``, with the changes."""
    import numpy as np
    import polars as pl

    names, code = _codes(by)
    jobs = np.bincount(code, minlength=len(names))
    mean = {c: np.bincount(code, weights=x, minlength=len(names)) / jobs
            for c, x in measured.items()}
    return pl.DataFrame({
        "name": names.astype(str), "jobs": jobs.astype(np.int64),
        "baseline_mean_wait_s": mean["bw"], "candidate_mean_wait_s": mean["cw"],
        "diff_mean_wait_s": mean["cw"] - mean["bw"],
        "baseline_mean_bsld": mean["bb"], "candidate_mean_bsld": mean["cb"],
        "diff_mean_bsld": mean["cb"] - mean["bb"],
    })


def _codes(column: pl.Series) -> tuple[npt.NDArray[np.str_], npt.NDArray[np.int64]]:
    """The sorted distinct values of ``column`` as text (null as ""), and each row's index
    into them: what ``np.unique(..., return_inverse=True)`` gives, without sorting millions
    of strings (a hash lookup per row into the few distinct values)."""
    import numpy as np
    import polars as pl

    text = column.cast(pl.String).fill_null("")
    names = text.unique().sort()
    code = text.cast(pl.Enum(names.to_list())).to_physical().to_numpy().astype(np.int64)
    return names.to_numpy().astype(str), code


def _extremes(table: pl.DataFrame) -> pl.DataFrame:
    """The :data:`TOP` largest rises of mean wait (losers), then the largest falls."""
    import polars as pl

    ranked = table.sort(["diff_mean_wait_s", "name"], descending=[True, False])
    losers = ranked.filter(pl.col("diff_mean_wait_s") > 0).head(TOP)
    winners = ranked.filter(pl.col("diff_mean_wait_s") < 0).reverse().head(TOP)
    return pl.concat([losers, winners])


def _row(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("name", "jobs", "baseline_mean_wait_s", "candidate_mean_wait_s", "diff_mean_wait_s",
            "baseline_mean_bsld", "candidate_mean_bsld", "diff_mean_bsld")
    return {k: (str(r[k]) if k == "name" else r[k]) for k in keys}


def notable_losers(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Groups whose mean wait rises materially (see the module docstring), worst first."""
    found = []
    for g in groups:
        base, diff = g["baseline_mean_wait_s"], g["diff_mean_wait_s"]
        if g["jobs"] < MIN_GROUP_JOBS or base is None or diff is None:
            continue
        if diff >= LOSS_ABS_S and diff >= LOSS_REL * base:
            found.append(g)
    return sorted(found, key=lambda g: -g["diff_mean_wait_s"])
