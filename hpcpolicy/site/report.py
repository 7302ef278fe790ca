"""What a what-if report says about the world it replayed in (a site model, or none)."""

from __future__ import annotations

from typing import Any

from hpcpolicy.world.protocol import TRAIN_FRAC
from hpcpolicy.world.site_model import SiteModel

__all__ = ["CALIBRATE_HINT", "with_site", "world_sentence"]

CALIBRATE_HINT = ("Fit the replay's world to this log with `hpcpolicy calibrate jobs.parquet "
                  "-o site.toml`, check it with `hpcpolicy fidelity jobs.parquet --site "
                  "site.toml`, and rerun with --site site.toml.")
"""The advice a report gives when the replay without a site model is poorly trusted."""


def _out_of_sample(site: SiteModel) -> str:
    p = site.provenance
    rho, rel, level = (p.get("oos_spearman_after"), p.get("oos_mean_wait_rel_error_after"),
                       p.get("oos_trust_after"))
    if rho is None or rel is None:
        return "its out-of-sample fidelity is not recorded"
    held = 1 - float(p.get("fit_frac", TRAIN_FRAC))
    return (f"out of sample (the last {held:.0%} of the log it was "
            f"fitted on) it reached Spearman {float(rho):.2f} and a mean wait {abs(float(rel)):.0%}"
            f" {'above' if float(rel) >= 0 else 'below'} the log's: trust {level}")


def world_sentence(site: SiteModel | None, path: str | None) -> str:
    """A sentence for the verdict naming the site model and its out-of-sample fidelity;
    empty without one."""
    if site is None:
        return ""
    elements = ", ".join(site.elements()) or "no element"
    return (f" Every run is replayed in the site model {path or 'given'} ({elements}); "
            f"{_out_of_sample(site)}.")


def with_site(section: dict[str, Any], site: SiteModel | None,
              path: str | None) -> dict[str, Any]:
    """The report's fidelity section with the site model's evidence in its explanation, or,
    without one and with poor trust, the advice to calibrate."""
    text = section.get("explanation", "")
    if site is None:
        if section.get("trust") == "poor":
            text = f"{text} {CALIBRATE_HINT}".strip()
        return section | {"explanation": text}
    evidence = "; ".join(f"{name}: {site.evidence[name]}" for name in site.elements()
                         if name in site.evidence)
    text = (f"{text}{world_sentence(site, path)}"
            + (f" Evidence from the log: {evidence}." if evidence else ""))
    return section | {"explanation": text.strip()}
