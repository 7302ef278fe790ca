"""Recognise an input's format from its first bytes, and open plain or gzipped text.

A UTF-8 byte order mark at the start of a file (as some Windows tools write) is not part of
its text: :func:`head_text` drops it, so a header after it is recognised as usual.
"""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

from hpcpolicy.errors import InputFormatError
from hpcpolicy.ingest.gpu.layouts import ALIBABA_NODES, GPU_LAYOUTS
from hpcpolicy.ingest.swf.columns import numeric_fields

__all__ = ["BOM", "SACCT_EXPORT", "SUPPORTED", "detect_format", "head_text", "is_gzip"]

BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark."""

_SACCT_KEYS = ("jobid", "jobidraw", "submit", "state", "elapsed", "ncpus", "reqcpus", "timelimit")
_GPU_MATCH = 3
"""Columns of a GPU-trace layout a header must name for ``auto`` to pick that layout."""
SACCT_EXPORT = "sacct --allusers --duplicates --parsable2 -S YYYY-MM-DD -E YYYY-MM-DD"
"""The sacct export suggested wherever one is, before its ``--format``: every user's jobs
(alone, sacct lists only the caller's), every record of a requeued job (``--duplicates``) and
a period (alone, only today's jobs)."""
SUPPORTED = (
    "SWF (';' header, or 18 numeric fields and possibly more columns), Slurm sacct (export "
    f"with `{SACCT_EXPORT} --format=...`), an Alibaba GPU-trace pod list "
    "(openb_pod_list_*.csv), a Helios job log (cluster_log.csv) or a Philly job log as CSV "
    "(see the README's GPU traces); or name it with --format"
)
"""The formats ``--format auto`` recognises, for error messages."""


def is_gzip(path: Path) -> bool:
    """Whether the file starts with the gzip magic bytes."""
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def head_text(path: Path, size: int = 65536) -> str:
    """Up to ``size`` bytes from the start of a plain or gzipped file, decoded leniently,
    without a byte order mark.

    Raises:
        InputFormatError: the file is missing, empty, or a broken gzip stream.
    """
    if not path.exists():
        raise InputFormatError(f"{path}: no such file")
    if path.is_dir():
        raise InputFormatError(f"{path}: is a folder; give the log file(s) inside it")
    try:
        if is_gzip(path):
            with gzip.open(path, "rb") as f:
                data = f.read(size)
        else:
            with open(path, "rb") as f:
                data = f.read(size)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputFormatError(
            f"{path}: cannot decompress ({exc}); the gzip file is truncated or damaged, "
            "download or copy it again"
        ) from None
    data = data.removeprefix(BOM)
    if not data.strip():
        raise InputFormatError(f"{path}: the file is empty; nothing to ingest")
    return data.decode("utf-8", errors="replace")


def _gpu_layout(path: Path, tokens: set[str]) -> str | None:
    """The GPU-trace layout whose columns the header names most (at least :data:`_GPU_MATCH`
    of them, and more than any other layout), or None.

    Raises:
        InputFormatError: the header is the Alibaba trace's node list, not a job log.
    """
    if set(ALIBABA_NODES.required) <= tokens:
        raise InputFormatError(
            f"{path}: this is an Alibaba GPU-trace node list, not a job log; ingest the pod "
            "list (openb_pod_list_*.csv) and give this file with --node-list"
        )
    scores = sorted(((sum(c in tokens for c in lay.columns), lay.name) for lay in GPU_LAYOUTS),
                    reverse=True)
    (best, name), (second, _) = scores[0], scores[1]
    return name if best >= _GPU_MATCH and best > second else None


def detect_format(path: Path) -> str:
    """``swf``, ``sacct``, ``alibaba``, ``helios`` or ``philly``, judged from the first lines
    of ``path``.

    Raises:
        InputFormatError: the file matches no supported format; the message lists them.
    """
    text = head_text(path)
    if "\x00" in text[:4096]:
        raise InputFormatError(
            f"{path}: looks like a binary file, not a text log; supported formats: {SUPPORTED}"
        )
    lines = [ln for ln in text.splitlines()[:50] if ln.strip()]
    first = lines[0].strip().lower()
    if first.startswith(";") or any(numeric_fields(ln) is not None for ln in lines[:5]):
        return "swf"
    # ';' and tabs too: the sacct reader then names the wrong separator and the fix
    header_tokens = {t.strip().strip('"').lower() for t in re.split(r"[|,;\t]", first)}
    if sum(k in header_tokens for k in _SACCT_KEYS) >= 2:
        return "sacct"
    gpu = _gpu_layout(path, header_tokens)
    if gpu is not None:
        return gpu
    if "|" in first:
        return "sacct"  # header-less parsable export; the sacct reader checks the columns
    raise InputFormatError(
        f"{path}: cannot tell the format from line 1 ({lines[0][:60]!r}); supported formats: "
        f"{SUPPORTED}"
    )
