#!/usr/bin/env bash
# Stop the test Slurm's recorded daemons (the state directory stays). See cluster.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "${PYTHON:-python3}" "$here/cluster.py" down "$@"
