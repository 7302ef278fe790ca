"""Issue 44 on the real trace: our inflation experiment against the paper's expected figures.

The figures (``tests/data/gpu_sharing/expected_allo_openb_default.csv``) are the allocated GPU
share at each 10 % of arrived workload, from the artifact of Weng et al. (USENIX ATC 2023),
``hkust-adsl/kubernetes-scheduler-simulator``, ``analysis_allo_discrete.csv``. One seed of
ours against their mean over ten: the bar for the mean over seeds is 1.5 points.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import shared_file

from hpcpolicy.gpu.inflation import InflationConfig, inflation_curve, run_inflation
from hpcpolicy.gpu.inflation_table import read_expected
from hpcpolicy.gpu.sharing import read_nodes, read_pods

EXPECTED = Path(__file__).parent / "data" / "gpu_sharing" / "expected_allo_openb_default.csv"
STEPS = np.arange(50, 131, 10)


@pytest.mark.parametrize("allocator", ["fgd", "bestfit"])
def test_one_seed_is_within_one_and_a_half_points_of_the_expected_mean(allocator: str) -> None:
    nodes = read_nodes(shared_file("openb_node_list_all_node.csv"))
    pods = read_pods(shared_file("openb_pod_list_default.csv"), nodes.models)
    assert (len(nodes.cpu), nodes.total_gpus) == (1213, 6212)
    run = run_inflation(nodes, pods, InflationConfig(allocator=allocator, seed=42))
    ours = inflation_curve(run, STEPS)
    expected = read_expected(EXPECTED).filter(allocator=allocator)
    theirs = np.array([expected[str(p)].mean() for p in STEPS])
    assert np.abs(ours - theirs).max() <= 1.5, list(zip(STEPS, ours, theirs, strict=True))
