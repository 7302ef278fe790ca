#!/usr/bin/env bash
# Bring the test Slurm up (idempotent); prints the SLURM_CONF to export. See cluster.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "${PYTHON:-python3}" "$here/cluster.py" up "$@"
