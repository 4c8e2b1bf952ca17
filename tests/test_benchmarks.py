"""Every benchmark has a smoke size that CI runs (benchmarks/smoke.py), so none can break unseen."""

from pathlib import Path

from benchmarks.smoke import CPU, REAL, TRAINER

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_every_benchmark_has_a_smoke_size():
    scripts = {p.name for p in BENCHMARKS.glob("bench_*.py")}
    assert scripts and scripts == set(CPU) | set(REAL) | set(TRAINER)
    assert not set(CPU) & set(REAL) and not (set(CPU) | set(REAL)) & set(TRAINER)
