"""What-if: compare candidate scheduling policies with today's, on the site's own log.

:func:`run_whatif` replays the baseline and the candidates under each scenario and compares
them window by window with bootstrap intervals; :func:`write_report` writes the report folder:

* ``report.json`` -- everything, in ``schemas/whatif.schema.json``;
* ``report.md`` -- the same for a wiki or a ticket;
* ``report.html`` -- one self-contained page with the plots (no network needed);
* ``outcomes.parquet`` -- every replayed job of every run (``run`` = the run id).

Example:
    >>> from hpcpolicy.whatif import WhatifConfig, run_whatif, write_report  # doctest: +SKIP
    >>> result = run_whatif(workload, cluster, WhatifConfig(candidates=("sjf+easy",)),
    ...                     source="jobs.parquet")  # doctest: +SKIP
    >>> write_report(result, "report/")  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

from hpcpolicy.errors import ConfigError
from hpcpolicy.whatif.runner import SCHEMA_VERSION, WhatifConfig, WhatifResult, run_whatif

__all__ = [
    "REPORT_FILES",
    "SCHEMA_VERSION",
    "WhatifConfig",
    "WhatifResult",
    "check_report_dir",
    "run_whatif",
    "write_report",
]

REPORT_FILES = ("report.json", "report.md", "report.html", "outcomes.parquet")
"""The files of a report folder."""


def check_report_dir(out_dir: str | Path, *, overwrite: bool = False) -> Path:
    """``out_dir`` as a Path, once it is known that a report may be written there.

    Raises:
        ConfigError: ``out_dir`` is a file, or already holds a report and ``overwrite`` is off.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file; give a folder for the report")
    present = [name for name in REPORT_FILES if (out / name).exists()]
    if present and not overwrite:
        raise ConfigError(f"{out} already holds a report ({', '.join(present)}); pass "
                          "--overwrite to replace it, or choose another folder")
    return out


def write_report(result: WhatifResult, out_dir: str | Path, *,
                 overwrite: bool = False) -> dict[str, Path]:
    """Write the report folder (each file atomically); returns file label -> path.

    Raises:
        ConfigError: ``out_dir`` is a file, or already holds a report and ``overwrite`` is off.
    """
    from hpcpolicy.atomic import write_json, write_text
    from hpcpolicy.sim.metrics import write_outcomes
    from hpcpolicy.whatif.html import write_html
    from hpcpolicy.whatif.markdown import render_markdown

    out = check_report_dir(out_dir, overwrite=overwrite)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "markdown": out / "report.md",
             "html": out / "report.html", "outcomes": out / "outcomes.parquet"}
    outcomes = result.outcomes()
    write_outcomes(outcomes, paths["outcomes"], {"hpcpolicy.whatif": result.doc["title"]})
    write_json(paths["json"], result.doc)
    write_text(paths["markdown"], render_markdown(result.doc))
    write_html(paths["html"], result.doc, outcomes)
    return paths
