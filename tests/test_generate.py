"""The Lublin-Feitelson generator: determinism, the model's distributions, the SWF it writes.

Expected figures are computed here from the model's description (numeric integration of the
stated distributions, Simpson's rule) or taken from the authors' own output
(``lublin_256.swf`` in ../shared/data); tolerances are five standard errors of the sample.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import shared_file
from numpy.random import PCG64, Generator
from typer.testing import CliRunner

from hpcpolicy.commands import app
from hpcpolicy.errors import ConfigError
from hpcpolicy.generate import GenerateConfig, generate, generate_swf
from hpcpolicy.generate.lublin import LublinParams, sample, sample_split

P = LublinParams()  # the published whole-sample fit
N = 50_000


@pytest.fixture(scope="module")
def jobs() -> object:
    return sample(N, 256, Generator(PCG64(11)))


def _integral(f: Callable[[np.ndarray], np.ndarray], lo: float, hi: float) -> float:
    """Simpson's rule on 20,000 intervals."""
    x = np.linspace(lo, hi, 20_001)
    w = np.ones_like(x)
    w[1:-1:2], w[2:-1:2] = 4, 2
    return float((hi - lo) / 60_000 * np.sum(w * f(x)))


def _gamma_pdf(a: float, b: float) -> Callable[[np.ndarray], np.ndarray]:
    def pdf(x: np.ndarray) -> np.ndarray:
        safe = np.maximum(x, 1e-300)
        return np.exp((a - 1) * np.log(safe) - safe / b - math.lgamma(a) - a * math.log(b))
    return pdf


def _within(observed: float, expected: float, se: float) -> None:
    assert abs(observed - expected) <= 5 * se, (observed, expected, se)


def _binomial_se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


# --- determinism and the file ------------------------------------------------------------

def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    a = generate_swf(tmp_path / "a.swf", jobs=500, procs=64, seed=7).read_bytes()
    b = generate_swf(tmp_path / "b.swf", jobs=500, procs=64, seed=7).read_bytes()
    c = generate_swf(tmp_path / "c.swf", jobs=500, procs=64, seed=8).read_bytes()
    assert a == b and a != c


def test_the_file_is_swf_with_a_header_the_reader_understands(tmp_path: Path) -> None:
    path = generate_swf(tmp_path / "w.swf", jobs=300, procs=128, seed=2)
    text = path.read_text().splitlines()
    data = [line.split() for line in text if not line.startswith(";")]
    assert len(data) == 300 and {len(f) for f in data} == {18}
    assert [int(f[0]) for f in data] == list(range(1, 301))
    for key in ("; Version: 2.2", "; MaxJobs: 300", "; MaxRecords: 300", "; MaxNodes: 128",
                "; MaxProcs: 128", "; UnixStartTime: 1704067200"):
        assert key in text
    assert any("seed 2" in line and "model lublin" in line for line in text)
    out = tmp_path / "w.parquet"
    result = CliRunner().invoke(app, ["ingest", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.with_name("w.ingest.json").read_text())
    assert (report["rows_read"], report["jobs_kept"], report["rows_rejected"]) == (300, 300, 0)
    assert report["inputs"][0]["header"]["MaxProcs"] == 128
    # a model trace has no waits, and ingest says so (issue 29); nothing else is noted
    assert [n.split(":")[0] for n in report["notes"]] == ["warning"]
    assert "none of the 300 jobs has a start or wait time" in report["notes"][0]
    table = pl.read_parquet(out)
    sizes = [int(f[4]) for f in data]
    assert table["alloc_cpus"].to_list() == sizes == table["req_cpus"].to_list()
    assert table["req_walltime_s"].null_count() == 300  # the model has no requested time
    assert table["submit_time"].min().isoformat() >= "2024-01-01T00:00:00+00:00"
    assert set(table["state"]) == {"completed"}


def test_split_model_marks_queues_and_keeps_interactive_jobs_small(tmp_path: Path) -> None:
    s = sample_split(20_000, 256, Generator(PCG64(3)))
    assert set(np.unique(s.queue)) == {0, 1}
    assert (np.diff(s.submit) >= 0).all()
    # interactive sizes stop at 2^(log2(256) - 1.5) = 90.5 -> 91 processors (uhi_below=1.5)
    assert s.size[s.queue == 0].max() <= 91 < s.size[s.queue == 1].max()
    path = generate(GenerateConfig(model="lublin-split", jobs=200, seed=1), tmp_path / "s.swf")
    assert "; Queue: 0 interactive" in path.path.read_text()


@pytest.mark.parametrize("procs", [1, 3, 100, 8192])
def test_sizes_runtimes_and_times_stay_in_range(procs: int) -> None:
    s = sample(5000, procs, Generator(PCG64(procs)))
    assert s.size.min() >= 1 and s.size.max() <= procs
    assert s.run.min() >= 0 and s.run.max() < math.exp(12)
    assert s.submit.min() >= 0 and (np.diff(s.submit) >= 0).all()


# --- the model's distributions -------------------------------------------------------------

def test_serial_share(jobs: object) -> None:
    serial = float(np.mean(jobs.size == 1))  # type: ignore[attr-defined]
    _within(serial, P.serial_prob, _binomial_se(P.serial_prob, N))


def _pow2_share(procs: int) -> float:
    """P(size is a power of two >= 2): the power-of-two branch always; the other parallel
    jobs when round(2^x) lands on one, x from the two-stage uniform."""
    uhi = math.log2(procs)
    umed = uhi - 2.5
    lo_d, hi_d = P.uprob / (umed - P.ulow), (1 - P.uprob) / (uhi - umed)

    def mass(a: float, b: float) -> float:  # P(a <= x < b) under the two-stage uniform
        low = max(0.0, min(b, umed) - max(a, P.ulow)) * lo_d
        high = max(0.0, min(b, uhi) - max(a, umed)) * hi_d
        return low + high

    lands = sum(mass(math.log2(2**k - 0.5), math.log2(2**k + 0.5))
                for k in range(1, int(uhi) + 1))
    return P.pow2_prob + (1 - P.serial_prob - P.pow2_prob) * lands


def test_power_of_two_share(jobs: object) -> None:
    size = jobs.size  # type: ignore[attr-defined]
    observed = float(np.mean((size > 1) & ((size & (size - 1)) == 0)))
    expected = _pow2_share(256)
    _within(observed, expected, _binomial_se(expected, N))


def _long_share(n: int, at: float) -> float:
    """P(log runtime >= at | size n): the hyper-gamma mixture cut at 12."""
    p = min(max(P.pa * n + P.pb, 0.0), 1.0)
    g1, g2 = _gamma_pdf(P.a1, P.b1), _gamma_pdf(P.a2, P.b2)
    above = p * _integral(g1, at, 12) + (1 - p) * _integral(g2, at, 12)
    below = p * _integral(g1, 0, 12) + (1 - p) * _integral(g2, 0, 12)
    return above / below


@pytest.mark.parametrize("n", [1, 2, 16, 64, 128])
def test_runtime_mixture_depends_on_size(jobs: object, n: int) -> None:
    size, run = jobs.size, jobs.run  # type: ignore[attr-defined]
    chosen = size == n
    observed = float(np.mean(run[chosen] >= 666))  # floor(exp(h)) >= 666 <=> h >= ln 666
    expected = _long_share(n, math.log(666))
    _within(observed, expected, _binomial_se(expected, int(chosen.sum())))


def test_bigger_jobs_run_longer(jobs: object) -> None:
    size, run = jobs.size, jobs.run  # type: ignore[attr-defined]
    ranks = [np.argsort(np.argsort(v)) for v in (size, run)]
    spearman = float(np.corrcoef(*ranks)[0, 1])
    assert spearman > 0.1
    medians = [np.median(run[(size >= lo) & (size < hi)]) for lo, hi in [(1, 2), (2, 32),
                                                                        (32, 257)]]
    assert medians == sorted(medians)


def test_mean_interarrival(jobs: object) -> None:
    a, b = P.aarr * P.arar, P.barr
    pdf = _gamma_pdf(a, b)
    norm = _integral(pdf, 0, 13)
    mean = _integral(lambda g: np.exp(g) * pdf(g), 0, 13) / norm
    square = _integral(lambda g: np.exp(2 * g) * pdf(g), 0, 13) / norm
    observed = float(np.diff(jobs.submit).mean())  # type: ignore[attr-defined]
    _within(observed, mean, math.sqrt(square - mean**2) / math.sqrt(N))


def test_daily_cycle_peaks_in_working_hours(jobs: object) -> None:
    submit = jobs.submit  # type: ignore[attr-defined]
    hours = np.bincount((submit % 86400) // 3600, minlength=24)
    assert 10 <= int(hours.argmax()) <= 16
    # 08:00-18:00 is buckets 16..35, cycle points i = 17..36 of the 48 in [11, 58]
    pdf = _gamma_pdf(P.anum, P.bnum)
    expected = _integral(pdf, 16.5, 36.5) / _integral(pdf, 10.5, 58.5)
    observed = float(np.mean((submit % 86400 >= 8 * 3600) & (submit % 86400 < 18 * 3600)))
    # arrivals come in bursts, so the share varies about 3x more than a binomial one: its
    # standard deviation over 30 seeds was 0.006 for 50,000 jobs; 0.03 is five of those
    assert abs(observed - expected) <= 0.03, (observed, expected)
    assert expected > 0.55  # ten hours hold well over their 42 % share of the day


# --- against the authors' program output -----------------------------------------------------

def test_matches_the_archives_lublin_256() -> None:
    ref = np.loadtxt(shared_file("lublin_256.swf"), comments=";")
    ours = sample(len(ref), 256, Generator(PCG64(2003)))
    n = len(ref)

    def two_sample(mask_ref: np.ndarray, mask_ours: np.ndarray) -> None:
        p = (mask_ref.mean() + mask_ours.mean()) / 2
        se = math.sqrt(p * (1 - p) * (1 / len(mask_ref) + 1 / len(mask_ours)))
        _within(float(mask_ours.mean()), float(mask_ref.mean()), se)

    ref_size, ref_run = ref[:, 4].astype(np.int64), ref[:, 3]
    two_sample(ref_size == 1, ours.size == 1)
    two_sample((ref_size & (ref_size - 1)) == 0, (ours.size & (ours.size - 1)) == 0)
    for lo, hi in [(1, 2), (2, 16), (16, 128), (128, 257)]:
        r, o = (ref_size >= lo) & (ref_size < hi), (ours.size >= lo) & (ours.size < hi)
        two_sample(r, o)
        two_sample(ref_run[r] >= 666, ours.run[o] >= 666)
    assert ref_size.max() == ours.size.max() == 256 and n == 10_000


# --- options and the command line ----------------------------------------------------------

@pytest.mark.parametrize(("field", "value", "text"), [
    ("model", "feitelson96", "lublin, lublin-split"),
    ("jobs", 0, "jobs must be between 1"),
    ("procs", 0, "procs must be between 1"),
    ("seed", -1, "seed must be >= 0"),
])
def test_bad_options_are_named(field: str, value: object, text: str) -> None:
    with pytest.raises(ConfigError, match=text):
        GenerateConfig(**{field: value})  # type: ignore[arg-type]


def test_cli_writes_then_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "t.swf"
    args = ["generate", "--jobs", "50", "--procs", "32", "--seed", "4", "-o", str(out)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "50 jobs" in first.stdout and out.exists()
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 1
    assert again.stderr.strip() == f"error: {out} already exists; pass --overwrite to replace it"
    assert CliRunner().invoke(app, [*args, "--overwrite"]).exit_code == 0


def test_cli_bad_model_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["generate", "--model", "x", "-o", str(tmp_path / "t.swf")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.strip() == "error: model 'x' is not one of lublin, lublin-split"
    assert not (tmp_path / "t.swf").exists()
