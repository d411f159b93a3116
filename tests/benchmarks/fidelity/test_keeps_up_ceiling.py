"""benchmarks/fidelity/keeps_up_ceiling.py on a hand-made table whose answers are known."""

from __future__ import annotations

import pandas as pd

from benchmarks.fidelity.keeps_up_ceiling import ceiling


def _row(run: str, p: int, cpu: float, rate: float, thr: float) -> dict:
    return {"run": run, "parallelism": p, "task_slots": 1, "cpu": cpu, "memory_mb": 2048, "checkpoint_interval_s": 10,
            "input_rate": rate, "throughput": thr, "latency_ms": 1000.0, "recovery_s": 30.0}  # fmt: skip


def test_inconsistent_rows_other_runs_and_ample_rows_are_counted() -> None:
    runs = pd.DataFrame(
        [
            _row("a", 4, 1.0, 10000, 10500),  # kept up
            _row("b", 4, 1.0, 12000, 11000),  # same configuration, fell behind at 0.917: capacity 11000
            _row("b", 8, 2.0, 10000, 9000),  # fell behind though the same configuration did 20000: inconsistent
            _row("a", 8, 2.0, 30000, 20000),  # fell behind, the others did at most 11000: consistent
        ]
    )
    c = ceiling(runs)
    assert c["inconsistent_rows"] == 1 and c["inconsistent_bound"] == 0.75
    # Row 0 from run b: capacity 11000 >= 0.95 x 10000, keeps up (right); row 1 from run a: kept up
    # at 10500 < 0.95 x 12000, undecided; row 2 from row 3: capacity 20000, keeps up (wrong);
    # row 3 from row 2: capacity 9000, falls behind (right).
    assert c["other_runs_decided"] == 3 and c["other_runs_undecided"] == 1
    assert c["other_runs_accuracy"] == 2 / 3
    # Capacity shown >= 1.1 x rate: row 0 (11000 by row 1) and row 2 (20000 by row 3), which fell behind.
    assert c["ample_rows"] == 2 and c["ample_below"] == 0.5
