"""Score a waiting queue with an exported hpcpolicy policy, using onnxruntime alone.

This script does not import hpcpolicy: everything it needs is in the policy directory
(``policy.onnx`` and ``manifest.json``). It shows how another scheduler (a Slurm plugin's
helper, a dashboard) can use a learned policy: read the features the manifest lists, normalise
them as the manifest says, pad the queue to K slots, and take the best-scored job.

Usage::

    python examples/score_queue_onnx.py runs/NAME/policy            # a built-in demo queue
    python examples/score_queue_onnx.py runs/NAME/policy queue.json

``queue.json`` holds ``{"cluster": {feature: raw value}, "jobs": [{"id": ..., feature: raw
value, ...}, ...]}`` with the raw (not normalised) values, in the units the manifest gives;
features left out count as 0.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

DEMO_QUEUE: dict[str, Any] = {
    "cluster": {"free_cores_frac": 0.25, "queue_length": 4, "run_remaining_mean_s": 5400,
                "run_remaining_max_s": 20000, "cores_released_1h_frac": 0.3},
    "jobs": [
        {"id": "1001", "wait_s": 7200, "req_walltime_s": 86400, "req_cores_frac": 0.5},
        {"id": "1002", "wait_s": 3600, "req_walltime_s": 1800, "req_cores_frac": 0.05,
         "fits_now": 1},
        {"id": "1003", "wait_s": 600, "req_walltime_s": 14400, "req_cores_frac": 0.2,
         "fits_now": 1},
        {"id": "1004", "wait_s": 60, "req_walltime_s": 600, "req_cores_frac": 0.75},
    ],
}


def normalise(raw: dict[str, Any], features: list[dict[str, Any]]) -> np.ndarray:
    """Raw values -> [0, 1] as the manifest says: x / scale, or log1p(x) / log1p(scale)."""
    out = []
    for f in features:
        x = max(float(raw.get(f["name"], 0.0)), 0.0)
        y = math.log1p(x) / math.log1p(f["scale"]) if f["transform"] == "log1p" else x / f["scale"]
        out.append(min(y, 1.0))
    return np.asarray(out, dtype=np.float32)


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__)
        return 2
    policy_dir = Path(argv[0])
    manifest = json.loads((policy_dir / "manifest.json").read_text(encoding="utf-8"))
    onnx_file = policy_dir / manifest["files"]["onnx"]["path"]
    if hashlib.sha256(onnx_file.read_bytes()).hexdigest() != manifest["files"]["onnx"]["sha256"]:
        print(f"{onnx_file}: SHA-256 differs from manifest.json; copy the policy again")
        return 1
    queue: dict[str, Any] = (json.loads(Path(argv[1]).read_text(encoding="utf-8"))
                             if len(argv) == 2 else DEMO_QUEUE)

    obs = manifest["observation"]
    k = obs["k"]
    if len(queue["jobs"]) > k:
        print(f"note: the policy sees {k} slots; scoring the first {k} of {len(queue['jobs'])}")
    visible = queue["jobs"][:k]
    jobs = np.zeros((1, k, len(obs["job_features"])), np.float32)
    mask = np.zeros((1, k), np.bool_)
    for slot, job in enumerate(visible):
        jobs[0, slot] = normalise(job, obs["job_features"])
        mask[0, slot] = True
    cluster = normalise(queue["cluster"], obs["cluster_features"])[None]

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
    scores = session.run(None, {"jobs": jobs, "cluster": cluster, "mask": mask})[0][0]

    order = np.argsort(-scores[: len(visible)], kind="stable")
    print(f"policy: {manifest['algo']} (hpcpolicy {manifest['package']['version']}), "
          f"K = {k}, reward = {manifest['reward']}")
    for rank, slot in enumerate(order, start=1):
        print(f"{rank:>3}. job {visible[slot]['id']:<10} score {scores[slot]: .4f}")
    print(f"next job: {visible[order[0]]['id']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
