"""calibrate's search replays only the jobs its figures need (issue 42 part 5: calibrate on a
450 k-job log within 10 minutes), and its figures are those of a replay of the whole log."""

from __future__ import annotations

from test_site import _as_logged, _workload

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.policies.settings import FairshareConfig
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.site.calibrate import _Search
from hpcpolicy.world import SiteModel

N = 1500
CUTS = (int(N * 0.7 * 0.7), int(N * 0.7))
"""Validation slice of an N-job log under calibrate's default split."""


def test_a_search_replay_is_shorter_and_measures_as_the_whole_log() -> None:
    """A log scheduled with fair share, where jobs submitted later start before earlier ones:
    a replay cut right after the measured jobs would shorten their waits (on 3000 such jobs,
    the train slice's mean-wait error moved from 0 to -13.5 % with a cut 10 % of the log later)."""
    cluster = ClusterSpec.homogeneous(64)
    truth = SimConfig(policy="fairshare", backfill="easy",
                      fairshare=FairshareConfig(weight_fairshare=30000, weight_age=1000,
                                                weight_size=0))
    logged = _as_logged(_workload(N), cluster, truth)
    search = _Search(logged, cluster, CUTS, None, 2)
    multifactor = SiteModel(priority="fairshare", weight_fairshare=30000, weight_size=0)
    for site in (SiteModel(), multifactor):
        whole = search.parts(site, "all")
        for upto, names in (("train", ("train",)), ("fit", ("train", "validation", "fit"))):
            part = search.parts(site, upto)
            assert {k: part[k] for k in names} == {k: whole[k] for k in names}

    assert search.parts(multifactor, "fit")["validation"]["mean_wait_rel_error"] == 0


def test_a_search_replay_stops_where_the_measured_jobs_have_all_started() -> None:
    """On a machine whose queue empties now and then (unlike the one above, where it grows to
    the end), the fitted part's replays leave out the last jobs."""
    cluster = ClusterSpec.homogeneous(128)
    logged = _as_logged(_workload(N), cluster, SimConfig(backfill="easy"))
    search = _Search(logged, cluster, CUTS, None, 2)
    assert search.parts(SiteModel(), "fit") == {
        k: v for k, v in search.parts(SiteModel(), "all").items() if k != "oos"}
    assert search.reach["train"] < search.reach["fit"] < len(logged)
