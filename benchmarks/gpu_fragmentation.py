"""Issue 44: the inflation experiment of "Beware of Fragmentation" on the Alibaba openb trace.

For each allocator (random, dotprod, clustering, packing, bestfit, fgd) and seed, pods of
``openb_pod_list_default.csv`` arrive on the GPU nodes of ``openb_node_list_all_node.csv``
until 130 % of the cluster's GPUs are asked for
(:func:`hpcpolicy.gpu.inflation_table.inflation_table`). Writes:

* ``<out>/gpu_fragmentation.csv``: one row per (allocator, seed), the allocated GPU share and
  the fragmentation (% of GPUs) at every percent from 0 to 130;
* ``<out>/gpu_fragmentation_vs_expected.csv``: our mean over seeds against the paper's
  artifact at every 10 % from 50 to 130 (``tests/data/gpu_sharing``);
* ``<out>/gpu_fragmentation.png``: allocated share against arrived workload, one line per
  allocator (mean), a band from the lowest to the highest seed.

With ``--learned DIR`` (an allocator exported by ``benchmarks/gpu_learned_allocator.py``) the
learned allocator is run too (no expected figures: it is not in the paper).

Usage:
    python -m benchmarks.gpu_fragmentation                       # 10 seeds, 6 allocators
    python -m benchmarks.gpu_fragmentation --learned benchmarks/results/allocator
    python -m benchmarks.gpu_fragmentation --seeds 42 --allocators fgd bestfit
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import polars as pl

from benchmarks._common import DATA, RESULTS, ROOT
from hpcpolicy.errors import HpcPolicyError
from hpcpolicy.gpu.allocator_artifact import load_allocator
from hpcpolicy.gpu.inflation_table import compare_expected, inflation_table, read_expected
from hpcpolicy.gpu.registry import LEARNED
from hpcpolicy.gpu.registry import SHARING_ALLOCATORS as ALLOCATORS
from hpcpolicy.gpu.sharing import read_nodes, read_pods

EXPECTED = ROOT / "tests" / "data" / "gpu_sharing" / "expected_allo_openb_default.csv"
STEPS = list(range(50, 131, 10))


def _plot(table: pl.DataFrame, percents: list[int], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in table["allocator"].unique(maintain_order=True):
        rows = table.filter(pl.col("allocator") == name)
        values = rows.select([f"alloc_{p}" for p in percents]).to_numpy()
        ax.plot(percents, values.mean(axis=0), label=name)
        ax.fill_between(percents, values.min(axis=0), values.max(axis=0), alpha=0.2)
    ax.set_xlabel("arrived GPU workload (% of cluster GPUs)")
    ax.set_ylabel("GPUs allocated (%)")
    ax.set_xlim(50, max(percents))
    ax.set_ylim(50, 100)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=Path, default=DATA / "openb_pod_list_default.csv")
    parser.add_argument("--nodes", type=Path, default=DATA / "openb_node_list_all_node.csv")
    parser.add_argument("--allocators", nargs="+", default=list(ALLOCATORS),
                        choices=ALLOCATORS)
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(42, 52)))
    parser.add_argument("--learned", type=Path, help="also run this exported allocator")
    parser.add_argument("--out", type=Path, default=RESULTS)
    a = parser.parse_args(argv)
    try:
        nodes = read_nodes(a.nodes)
        pods = read_pods(a.pods, nodes.models)
        weights = load_allocator(a.learned) if a.learned else ()
        names = [*a.allocators, LEARNED] if a.learned else a.allocators
        percents = list(range(0, 131))
        start = time.perf_counter()
        table = inflation_table(nodes, pods, names, a.seeds, percents, weights=weights)
        seconds = time.perf_counter() - start
        a.out.mkdir(parents=True, exist_ok=True)
        table.write_csv(a.out / "gpu_fragmentation.csv")
        _plot(table, percents, a.out / "gpu_fragmentation.png")
        cmp = compare_expected(table, read_expected(EXPECTED), STEPS)
    except HpcPolicyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    cmp.write_csv(a.out / "gpu_fragmentation_vs_expected.csv")
    wide = cmp.with_columns(pl.format("{} ({})", pl.col("ours").round(2),
                                      pl.col("diff").round(2)).alias("cell"))
    print(wide.pivot(on="percent", index="allocator", values="cell"))
    print(f"{len(names)} allocators x {len(a.seeds)} seeds in {seconds:.1f} s; "
          f"worst |diff| {float(cmp['diff'].abs().max()):.2f} points; files in {a.out}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
