"""Latency of one scheduling decision (K = 128) with an exported policy, on one CPU core.

Measures, one observation per call, after a warm-up:

* ``onnx``: ``LoadedPolicy.scores`` with onnxruntime (intra-op threads = 1), as a scheduler
  calls it (input checks and conversion included), and the bare ``InferenceSession.run``;
* ``torchscript``: the bare module call under ``torch.inference_mode`` (torch threads = 1), of
  the export this script writes itself (hpcpolicy never loads TorchScript: it runs code it
  carries), so not with ``--policy``;
* ``torch_eager``: the training-side ``PolicyScorer`` module, for reference.

Target: median <= 0.1 ms for the onnx ``scores`` call (the seed paper reports
about 1 ms per decision). Writes JSON (``--out``, default ``benchmarks/results/
inference.json``) and prints one line.

Usage::

    python -m benchmarks.inference                      # an untrained 32-16-8 policy, K = 128
    python -m benchmarks.inference --policy runs/NAME/policy --calls 20000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import RESULTS, cpu_model

TARGET_MS = 0.1


def _time_calls(fn: Callable[[], Any], calls: int, warmup: int) -> dict[str, float]:
    """Median / p90 / p99 of single-call latencies in milliseconds."""
    for _ in range(warmup):
        fn()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        start = clock()
        fn()
        samples.append((clock() - start) / 1e6)
    samples.sort()
    return {"median_ms": statistics.median(samples),
            "p90_ms": samples[int(0.9 * (calls - 1))],
            "p99_ms": samples[int(0.99 * (calls - 1))], "calls": calls}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", type=Path, help="policy directory (default: export an "
                        "untrained policy with the default network)")
    parser.add_argument("--k", type=int, default=128, help="slots per decision (default 128)")
    parser.add_argument("--valid", type=float, default=0.5, help="share of valid slots")
    parser.add_argument("--calls", type=int, default=5000, help="timed calls per variant")
    parser.add_argument("--warmup", type=int, default=500, help="untimed calls first")
    parser.add_argument("--seed", type=int, default=0, help="seed of the inputs and weights")
    parser.add_argument("--out", type=Path, default=RESULTS / "inference.json",
                        help="where to write the JSON result")
    args = parser.parse_args(argv)

    import onnxruntime
    import torch

    from hpcpolicy.artifact import load_policy
    from hpcpolicy.atomic import write_json
    from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
    from hpcpolicy.learn.networks import ActorCritic, PolicyScorer

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        policy_dir = args.policy
        agent = None
        if policy_dir is None:
            from hpcpolicy.learn.export import export_policy

            agent = ActorCritic(len(JOB_FEATURES), len(CLUSTER_FEATURES))
            policy_dir = export_policy(agent, Path(tmp) / "policy", k=args.k, metrics={},
                                       config={"algo": "untrained", "seed": args.seed,
                                               "hidden": [32, 16, 8], "activation": "tanh"})
        rng = np.random.default_rng(args.seed)
        jobs = rng.random((1, args.k, len(JOB_FEATURES)), dtype=np.float32)
        cluster = rng.random((1, len(CLUSTER_FEATURES)), dtype=np.float32)
        mask = rng.random((1, args.k)) < args.valid
        mask[0, 0] = True

        results: dict[str, dict[str, float]] = {}
        onnx_policy = load_policy(policy_dir)
        feeds = {"jobs": jobs, "cluster": cluster, "mask": mask}
        results["onnx_scores"] = _time_calls(lambda: onnx_policy.scores(jobs[0], cluster[0],
                                                                        mask[0]),
                                             args.calls, args.warmup)
        session = onnx_policy._model._session
        results["onnx_session_run"] = _time_calls(lambda: session.run(None, feeds), args.calls,
                                                  args.warmup)
        tensors = tuple(torch.from_numpy(x) for x in (jobs, cluster, mask))
        if agent is not None:  # our own export, just written: safe to open
            module = torch.jit.load(  # type: ignore[no-untyped-call]
                str(policy_dir / "policy.torchscript.pt"))

            def bare_ts() -> Any:
                with torch.inference_mode():
                    return module(*tensors)

            results["torchscript_module"] = _time_calls(bare_ts, args.calls, args.warmup)
            eager = PolicyScorer(agent.scorer).eval()

            def bare_eager() -> Any:
                with torch.inference_mode():
                    return eager(*tensors)

            results["torch_eager_module"] = _time_calls(bare_eager, args.calls, args.warmup)

    out = {
        "benchmark": "inference",
        "k": args.k, "valid_share": args.valid, "batch": 1,
        "policy": str(args.policy) if args.policy else "untrained default 32-16-8 scorer",
        "target_median_ms": TARGET_MS,
        "meets_target": results["onnx_scores"]["median_ms"] <= TARGET_MS,
        "results": results,
        "conditions": {
            "cpu": cpu_model(), "cpu_count": os.cpu_count(),
            "loadavg_1m": os.getloadavg()[0], "torch_threads": torch.get_num_threads(),
            "onnxruntime_intra_op_threads": 1, "python": sys.version.split()[0],
            "torch": torch.__version__, "onnxruntime": onnxruntime.__version__,
            "numpy": np.__version__,
        },
    }
    write_json(args.out, out)
    r = results
    print(f"inference K={args.k}: onnx scores {r['onnx_scores']['median_ms'] * 1000:.1f} us "
          f"(run {r['onnx_session_run']['median_ms'] * 1000:.1f}) median; target "
          f"{TARGET_MS * 1000:.0f} us: {'met' if out['meets_target'] else 'MISSED'} "
          f"[load {out['conditions']['loadavg_1m']:.2f}] -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
