"""How much input is accepted: a log's line length, header width and gzip expansion, and
a cluster spec's size.

A job log is many short lines. A few bytes can still describe gigabytes (a gzip stream of
zeros, one endless field), so every reader checks these limits *as it reads*, and a file that
breaks one ends in one :class:`~hpcpolicy.errors.InputFormatError` line naming the file, the
line, the limit and the ``hpcpolicy ingest`` option that raises it:

* a line (header, comment or data) may hold at most :attr:`Limits.line_bytes` bytes;
* a header may name at most :attr:`Limits.columns` columns and hold at most
  :attr:`Limits.header_bytes` bytes (:data:`HEADER_BYTES_PER_COLUMN` per column allowed);
* gzip data may expand at most :attr:`Limits.gzip_ratio` times its compressed size, once more
  than :data:`GZIP_FLOOR_BYTES` have come out of it.

The real logs in the shared data set stay far inside the defaults: their longest line is
2,584 bytes (a ``sacct --format=ALL`` export), their widest header 109 columns, and their
gzip files expand 4.8 to 11.6 times (CTC-SP2, HPC2N, KTH-SP2, RICC).

A cluster spec may have at most :data:`MAX_GROUPS` node groups and :data:`MAX_NODES` nodes
(:func:`check_cluster_size`), and its file :data:`SPEC_BYTES_PER_GROUP` bytes per group
(:func:`check_cluster_bytes`); the environment variables :data:`GROUPS_ENV` and
:data:`NODES_ENV` raise them, as a spec is read by many commands).

Example:
    >>> Limits().header_bytes
    64000
    >>> Limits(columns=10).check_columns(12, "log.csv")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hpcpolicy.errors.InputFormatError: log.csv: line 1: the header names 12 columns, ...
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hpcpolicy.errors import ConfigError, InputFormatError

__all__ = ["GROUPS_ENV", "GZIP_FLOOR_BYTES", "HEADER_BYTES_PER_COLUMN", "MAX_GROUPS", "MAX_NODES",
           "NODES_ENV", "SPEC_BYTES_PER_GROUP", "Limits", "check_cluster_bytes",
           "check_cluster_size"]

HEADER_BYTES_PER_COLUMN = 64
"""Header bytes allowed per column allowed (sacct's longest field name has 19 letters)."""
GZIP_FLOOR_BYTES = 64 << 20
"""Decompressed bytes below which the gzip ratio is not checked (small files of repeated
lines may expand more than a log does, and cost nothing)."""


@dataclass(frozen=True)
class Limits:
    """The bounds one ingest reads its inputs with (``--max-line-bytes``, ``--max-columns``,
    ``--max-gzip-ratio``)."""

    line_bytes: int = 1 << 20
    """Longest line accepted, in bytes, without its line break."""
    columns: int = 1000
    """Most columns a header may name (``sacct --format=ALL`` gives about 110)."""
    gzip_ratio: float = 100.0
    """Most times gzip data may expand (real logs: 5 to 12 times)."""

    @property
    def header_bytes(self) -> int:
        """Longest header line accepted, in bytes."""
        return HEADER_BYTES_PER_COLUMN * self.columns

    def line_error(self, where: str, line: int, what: str) -> InputFormatError:
        """The error for line ``line`` of ``where`` running past :attr:`line_bytes`."""
        return InputFormatError(
            f"{where}: line {line} is longer than {self.line_bytes:,} bytes: not a line of "
            f"{what} (binary data?); raise --max-line-bytes if it is one"
        )

    def header_error(self, where: str, line: int) -> InputFormatError:
        """The error for a header line longer than :attr:`header_bytes`."""
        return InputFormatError(
            f"{where}: line {line}: the header is longer than {self.header_bytes:,} bytes "
            f"({HEADER_BYTES_PER_COLUMN} per column for {self.columns:,} columns); is it the "
            "right file? (raise --max-columns if it is)"
        )

    def check_columns(self, n: int, where: str, line: int = 1) -> None:
        """Raise when a header names more than :attr:`columns` columns."""
        if n > self.columns:
            raise InputFormatError(
                f"{where}: line {line}: the header names {n:,} columns, more than the "
                f"{self.columns:,} allowed; is it the right file? (raise --max-columns if it is)"
            )

    def check_gzip(self, where: str, compressed: int, expanded: int) -> None:
        """Raise when ``compressed`` bytes of gzip data gave more than :attr:`gzip_ratio`
        times as many (``expanded``), past :data:`GZIP_FLOOR_BYTES`."""
        if expanded > GZIP_FLOOR_BYTES and expanded > self.gzip_ratio * compressed:
            raise InputFormatError(
                f"{where}: the gzip data expands more than {self.gzip_ratio:g} times "
                f"({expanded:,} bytes from {compressed:,} so far): a "
                "compression bomb, not a log; raise --max-gzip-ratio if it really is one"
            )


MAX_GROUPS = 256
"""Most node groups a cluster spec may have (a heterogeneous machine has tens): the pooled
replay keeps jobs x groups x 4 counts, so 10,000 groups asked for > 8 GB on a small log."""
MAX_NODES = 1_000_000
"""Most nodes a cluster spec may have in all (the largest machines have about 160,000)."""
SPEC_BYTES_PER_GROUP = 4096
"""Bytes of cluster spec file allowed per group allowed, checked before it is parsed (a
14 MB spec of 300,000 groups took 38 s in Python's TOML parser)."""
GROUPS_ENV = "HPCPOLICY_MAX_CLUSTER_GROUPS"
"""Environment variable that raises :data:`MAX_GROUPS`."""
NODES_ENV = "HPCPOLICY_MAX_CLUSTER_NODES"
"""Environment variable that raises :data:`MAX_NODES`."""


def _cap(env: str, default: int) -> int:
    text = os.environ.get(env, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"{env}={text!r}: must be a positive whole number (or unset, for "
                          f"{default:,})")
    return int(text)


def check_cluster_bytes(where: str, size: int) -> None:
    """Refuse a cluster spec file (``where``, of ``size`` bytes) larger than
    :data:`SPEC_BYTES_PER_GROUP` bytes per group allowed, before it is parsed.

    Raises:
        ConfigError: naming the limit and the variable that raises it.
    """
    cap = SPEC_BYTES_PER_GROUP * _cap(GROUPS_ENV, MAX_GROUPS)
    if size > cap:
        raise ConfigError(f"{where}: {size:,} bytes, more than the {cap:,} a cluster spec may "
                          f"have ({SPEC_BYTES_PER_GROUP:,} per node group allowed); is it the "
                          f"right file? (set {GROUPS_ENV} to allow more groups)")


def check_cluster_size(groups: int, nodes: int) -> None:
    """Refuse a cluster spec with more than :data:`MAX_GROUPS` groups or :data:`MAX_NODES`
    nodes (raised by :data:`GROUPS_ENV` and :data:`NODES_ENV`), before anything is built
    for it.

    Raises:
        ConfigError: naming the limit and the variable that raises it.
    """
    for what, n, env, default in (("node groups", groups, GROUPS_ENV, MAX_GROUPS),
                                  ("nodes", nodes, NODES_ENV, MAX_NODES)):
        cap = _cap(env, default)
        if n > cap:
            raise ConfigError(f"{n:,} {what}, more than the {cap:,} a cluster spec may have; "
                              f"is it the right file? (set {env} to allow more)")
