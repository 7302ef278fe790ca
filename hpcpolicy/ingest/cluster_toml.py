"""A cluster spec that an input describes, and its TOML text (``NAME.cluster.toml``).

Some traces come with a description of the machine they ran on (the Alibaba GPU trace's node
list). A reader hands it to the pipeline as a :class:`ClusterDoc`; the pipeline writes it
beside the job table, in the format :func:`hpcpolicy.cluster_io.load_cluster` reads (see
``schemas/cluster.schema.json``), with comment lines that say where it came from.

Example:
    >>> from hpcpolicy.cluster import ClusterSpec, NodeGroup
    >>> doc = ClusterDoc(ClusterSpec((NodeGroup("t4x2", 3, 104, 524288, 2, "t4"),),
    ...                              name="demo"), ("made by hand",))
    >>> print(doc.to_toml())  # doctest: +NORMALIZE_WHITESPACE
    # made by hand
    <BLANKLINE>
    name = "demo"
    <BLANKLINE>
    [[groups]]
    name = "t4x2"
    count = 3
    cores = 104
    mem_mib = 524288
    gpus = 2
    gpu_type = "t4"
    gpu_speed = 1.0
    <BLANKLINE>
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hpcpolicy.cluster import ClusterSpec

__all__ = ["ClusterDoc"]


def _string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value, ensure_ascii=True)


@dataclass(frozen=True)
class ClusterDoc:
    """A cluster spec to write as TOML, with the comment lines that head the file."""

    spec: ClusterSpec
    """The machine."""
    comments: tuple[str, ...] = ()
    """Lines of the comment at the top of the file (without ``#``)."""

    def to_toml(self) -> str:
        """The spec as a TOML document (``name``, ``notes``, one ``[[groups]]`` per group)."""
        lines = [f"# {c}".rstrip() for c in self.comments]
        lines += ["", f"name = {_string(self.spec.name)}"]
        if self.spec.notes:
            lines.append("notes = [")
            lines += [f"  {_string(n)}," for n in self.spec.notes]
            lines.append("]")
        for g in self.spec.groups:
            lines += ["", "[[groups]]", f"name = {_string(g.name)}", f"count = {g.count}",
                      f"cores = {g.cores}", f"mem_mib = {g.mem_mib}"]
            if g.gpus:
                lines += [f"gpus = {g.gpus}", f"gpu_type = {_string(g.gpu_type or '')}",
                          f"gpu_speed = {float(g.gpu_speed)!r}"]
            if g.rack is not None:
                lines.append(f"rack = {_string(g.rack)}")
        return "\n".join(lines) + "\n"
