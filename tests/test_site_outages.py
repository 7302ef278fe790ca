"""Outages in a site model (issues 41 and 42): dated in site.toml, one per line, merged and
with a minimum size, read back to the same model; replayed by the world as unplanned outages;
found by calibrate in a built log at their size and interval."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_site import _workload

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.capacity import Outage as Down
from hpcpolicy.sim.engine import simulate
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.site.calibrate import CalibrateConfig, calibrate
from hpcpolicy.world import Outage, SiteModel, apply_site, dumps, loads
from hpcpolicy.world.site_model import merge_outages

JULY_2002 = 1_027_850_400
"""2002-07-28T10:00:00Z in Unix seconds."""


def test_outages_are_written_as_dates_one_per_line_and_read_back() -> None:
    site = SiteModel(availability=0.9, outages=(
        Outage(JULY_2002, JULY_2002 + 8 * 3600, 64),
        Outage(JULY_2002 + 86400, JULY_2002 + 86400 + 5400, 12)))
    text = dumps(site)
    lines = [line.strip() for line in text.splitlines()]
    assert "{ start = 2002-07-28T10:00:00Z, end = 2002-07-28T18:00:00Z, cores = 64 }," in lines
    assert "{ start = 2002-07-29T10:00:00Z, end = 2002-07-29T11:30:00Z, cores = 12 }," in lines
    assert max(len(line) for line in text.splitlines()) <= 100
    assert loads(text) == site


def test_a_date_without_an_offset_is_utc() -> None:
    site = loads("[capacity]\noutages = [\n  { start = 2002-07-28T10:00:00, "
                 "end = 2002-07-28T18:00:00, cores = 8 },\n]\n")
    assert site.outages == (Outage(JULY_2002, JULY_2002 + 8 * 3600, 8),)


@pytest.mark.parametrize("text,message", [
    ("[capacity]\noutages = [{ start_s = 5, end_s = 9, cores = 3 }]\n",
     r"capacity.outages\[0\]: start_s/end_s .* no longer read; write dates, .*rerun"),
    ("[capacity]\noutages = [{ start = 5, end = 9, cores = 3 }]\n",
     r"capacity.outages\[0\].start: expected a date and time \(UTC\) such as"),
    ("[capacity]\noutages = [{ start = 2002-07-28T10:00:00Z, end = 2002-07-28T18:00:00Z }]\n",
     r"missing key 'cores'; an outage is \{ start = "),
])
def test_old_or_bad_outages_are_refused_in_one_line_naming_the_fix(text: str,
                                                                   message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        loads(text)
    assert "\n" not in str(err.value)


def test_outages_closer_than_an_hour_merge_and_small_ones_go() -> None:
    found = [(0, 7200, 40), (7200 + 3599, 20000, 30), (30000, 40000, 50),
             (50000, 90000, 1)]
    merged = merge_outages(found, min_cores=2, gap_s=3600, most=10)
    assert merged == (Outage(0, 20000, 30), Outage(30000, 40000, 50))
    assert merge_outages(found, min_cores=2, gap_s=3600, most=1) == (Outage(0, 20000, 30),)


def test_the_world_replays_the_dated_outages_from_the_workload_origin() -> None:
    w = replace(_workload(200), origin=JULY_2002)
    site = SiteModel(outages=(Outage(JULY_2002 + 600, JULY_2002 + 4200, 100),))
    world = apply_site(site, w, ClusterSpec.homogeneous(64))
    assert world.cfg.outages == (Down(start=600, end=4200, cores=64),)
    assert apply_site(site.without("outages"), w, ClusterSpec.homogeneous(64)).cfg.outages == ()


def test_calibrate_finds_an_outage_of_known_size_and_replays_it() -> None:
    """24 of 64 cores out for 8 hours (replayed as an unplanned outage to make the log):
    calibrate finds it within an hour and 5 % of its cores, dated from the workload's origin,
    keeps it, and the world of the site model replays it."""
    w = replace(_workload(), origin=JULY_2002)
    cluster = ClusterSpec.homogeneous(64)
    at, hours = int(w.submit[1000]), 8 * 3600
    down = Down(start=at, end=at + hours, cores=24)
    logged = replace(w, logged_start=simulate(w, cluster, SimConfig(backfill="easy",
                                                                     outages=(down,))).start)
    fit = calibrate(logged, cluster, CalibrateConfig(bisect_steps=2))
    assert "outages" in fit.site.elements()
    found = [o for o in fit.site.outages if abs(o.start_s - JULY_2002 - at) <= 3600
             and abs(o.end_s - JULY_2002 - at - hours) <= 3600 and abs(o.cores - 24) <= 0.05 * 24]
    assert found, fit.site.outages
    world = apply_site(fit.site, logged, cluster)
    assert any(abs(o.start - at) <= 3600 and o.cores == found[0].cores
               for o in world.cfg.outages)
    assert fit.after["spearman"] > fit.before["spearman"]
    assert abs(fit.after["mean_wait_rel_error"]) < abs(fit.before["mean_wait_rel_error"])
    # out of sample, the model without the outages is as far off as the plain replay
    assert fit.without["outages"] == {k: fit.before[k] for k in fit.without["outages"]}
    assert loads(dumps(fit.site)).outages == fit.site.outages
