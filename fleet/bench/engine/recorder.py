"""Counting what a step does, in each process, and merging the processes' counts into the result form.

Latencies are recorded in microseconds in HDR histograms (``hdrh``): one for whole transactions per interval and per
step, one per statement per step. A process sends its interval deltas and its step totals as plain dicts (the
histograms base64-encoded), so the same merge serves one process or several.
"""

from __future__ import annotations

from typing import Any

from hdrh.histogram import HdrHistogram

from fleet.bench.engine.results import IntervalPoint, Latency, StatementResult

#: Latencies above this (one hour, in µs) are recorded as this.
MAX_LATENCY_US = 3_600_000_000
#: A step's histograms keep 3 significant digits; an interval's 2 (its percentiles are read every second, and reading
#: costs in proportion to the histogram's size).
STEP_DIGITS = 3
INTERVAL_DIGITS = 2


def new_histogram(digits: int = STEP_DIGITS) -> HdrHistogram:
    """An empty latency histogram (µs, 1 µs to an hour)."""
    return HdrHistogram(1, MAX_LATENCY_US, digits)


def record(histogram: HdrHistogram, micros: int) -> None:
    """Record one latency, clamped into the histogram's range."""
    histogram.record_value(1 if micros < 1 else (micros if micros < MAX_LATENCY_US else MAX_LATENCY_US))


def latency(histogram: HdrHistogram, total_us: int) -> Latency:
    """min/avg/p50/p95/p99/max in milliseconds (the average exact, from ``total_us``, the sum of the latencies);
    all None for an empty histogram."""
    count = histogram.get_total_count()
    if count == 0:
        return Latency()
    ms = 1000.0
    percentiles = histogram.get_percentile_to_value_dict([50, 95, 99])
    return Latency(
        min=round(histogram.get_min_value() / ms, 3),
        avg=round(total_us / count / ms, 3),
        p50=round(percentiles[50] / ms, 3),
        p95=round(percentiles[95] / ms, 3),
        p99=round(percentiles[99] / ms, 3),
        max=round(histogram.get_max_value() / ms, 3),
    )


def encode(histogram: HdrHistogram) -> str:
    """A histogram as text (empty for an empty one)."""
    return histogram.encode().decode() if histogram.get_total_count() else ""


def decode(text: str, digits: int = STEP_DIGITS) -> HdrHistogram:
    """A histogram from ``encode``'s text."""
    histogram = new_histogram(digits)
    if text:
        histogram.add(HdrHistogram.decode(text.encode()))
    return histogram


class Recorder:
    """What one process measured of one step: per statement and per transaction, the step and the interval."""

    __slots__ = (
        "errors",
        "failed",
        "interval_errors",
        "interval_failed",
        "interval_histogram",
        "interval_lag_n",
        "interval_lag_us",
        "interval_queries",
        "interval_sum_us",
        "interval_transactions",
        "queries",
        "statement_executions",
        "statement_failures",
        "statement_histograms",
        "statement_rows",
        "statement_sum_us",
        "transaction_histogram",
        "transaction_sum_us",
        "transactions",
    )

    def __init__(self, statements: int) -> None:
        self.transactions = 0
        self.failed = 0
        self.queries = 0
        self.errors: dict[str, list[Any]] = {}  # code -> [count, first message]
        self.transaction_histogram = new_histogram()
        self.transaction_sum_us = 0
        self.statement_executions = [0] * statements
        self.statement_failures = [0] * statements
        self.statement_rows = [0] * statements
        self.statement_sum_us = [0] * statements
        self.statement_histograms = [new_histogram() for _ in range(statements)]
        self.interval_transactions = 0
        self.interval_failed = 0
        self.interval_queries = 0
        self.interval_errors = 0
        self.interval_lag_us = 0
        self.interval_lag_n = 0
        self.interval_sum_us = 0
        self.interval_histogram = new_histogram(INTERVAL_DIGITS)

    def statement(self, index: int, micros: int, rows: int) -> None:
        """A statement succeeded."""
        self.statement_executions[index] += 1
        self.statement_rows[index] += rows
        self.statement_sum_us[index] += micros
        record(self.statement_histograms[index], micros)
        self.queries += 1
        self.interval_queries += 1

    def statement_failed(self, index: int, code: int, message: str) -> None:
        """A statement failed with a server error (or a lost connection, 2013)."""
        self.statement_executions[index] += 1
        self.statement_failures[index] += 1
        self.queries += 1
        self.interval_queries += 1
        self.error(code, message)

    def error(self, code: int, message: str) -> None:
        """An error outside any statement (a connection that could not be opened again)."""
        entry = self.errors.get(str(code))
        if entry is None:
            self.errors[str(code)] = [1, message]
        else:
            entry[0] += 1
        self.interval_errors += 1

    def transaction(self, micros: int, ok: bool, lag_us: int | None) -> None:
        """A transaction ended (``ok``: every statement succeeded)."""
        self.transactions += 1
        self.interval_transactions += 1
        if ok:
            record(self.transaction_histogram, micros)
            record(self.interval_histogram, micros)
            self.transaction_sum_us += micros
            self.interval_sum_us += micros
        else:
            self.failed += 1
            self.interval_failed += 1
        if lag_us is not None:
            self.interval_lag_us += lag_us
            self.interval_lag_n += 1

    def take_interval(self, seconds: float) -> dict[str, Any]:
        """The interval's counts since the last call (``seconds`` long), and a fresh interval."""
        delta = {
            "seconds": seconds,
            "transactions": self.interval_transactions,
            "failed": self.interval_failed,
            "queries": self.interval_queries,
            "errors": self.interval_errors,
            "lag_us": self.interval_lag_us,
            "lag_n": self.interval_lag_n,
            "sum_us": self.interval_sum_us,
            "histogram": self.interval_histogram,
        }
        self.interval_transactions = self.interval_failed = self.interval_queries = self.interval_errors = 0
        self.interval_lag_us = self.interval_lag_n = self.interval_sum_us = 0
        self.interval_histogram = new_histogram(INTERVAL_DIGITS)
        return delta

    def totals(self, seconds: float) -> dict[str, Any]:
        """The step's totals over ``seconds`` of measurement."""
        return {
            "seconds": seconds,
            "transactions": self.transactions,
            "failed": self.failed,
            "queries": self.queries,
            "errors": self.errors,
            "sum_us": self.transaction_sum_us,
            "histogram": self.transaction_histogram,
            "statements": [
                {"executions": e, "failures": f, "rows": r, "sum_us": u, "histogram": h}
                for e, f, r, u, h in zip(
                    self.statement_executions,
                    self.statement_failures,
                    self.statement_rows,
                    self.statement_sum_us,
                    self.statement_histograms,
                    strict=True,
                )
            ],
        }


def portable(counts: dict[str, Any]) -> dict[str, Any]:
    """An interval delta or totals with its histograms encoded (for a pipe between processes)."""
    out = dict(counts, histogram=encode(counts["histogram"]))
    if "statements" in counts:
        out["statements"] = [dict(s, histogram=encode(s["histogram"])) for s in counts["statements"]]
    return out


def restored(counts: dict[str, Any]) -> dict[str, Any]:
    """The inverse of ``portable``."""
    if "statements" not in counts:
        return dict(counts, histogram=decode(counts["histogram"], INTERVAL_DIGITS))
    out = dict(counts, histogram=decode(counts["histogram"]))
    out["statements"] = [dict(s, histogram=decode(s["histogram"])) for s in counts["statements"]]
    return out


def merge_interval(t: float, deltas: list[dict[str, Any]]) -> IntervalPoint:
    """One progress point from the processes' deltas of the same interval."""
    seconds = max((d["seconds"] for d in deltas), default=0.0) or 1e-9
    histogram = new_histogram(INTERVAL_DIGITS)
    for d in deltas:
        histogram.add(d["histogram"])
    count = histogram.get_total_count()
    lag_n = sum(d["lag_n"] for d in deltas)
    errors = sum(d["errors"] for d in deltas)
    return IntervalPoint(
        t=round(t, 3),
        tps=round(sum(d["transactions"] - d["failed"] for d in deltas) / seconds, 2),
        qps=round(sum(d["queries"] for d in deltas) / seconds, 2),
        lat_avg_ms=round(sum(d["sum_us"] for d in deltas) / count / 1000, 3) if count else None,
        lat_p95_ms=round(histogram.get_value_at_percentile(95) / 1000, 3) if count else None,
        errors=errors,
        err_per_s=round(errors / seconds, 2),
        lag_ms=round(sum(d["lag_us"] for d in deltas) / lag_n / 1000, 3) if lag_n else None,
    )


def merge_totals(totals: list[dict[str, Any]], sql: list[tuple[str, str]]) -> dict[str, Any]:
    """The step's numbers from the processes' totals: counts, rates, latency, errors and the statements
    (``sql``: each statement's name and text)."""
    seconds = max((t["seconds"] for t in totals), default=0.0) or 1e-9
    histogram = new_histogram()
    errors: dict[str, dict[str, Any]] = {}
    for t in totals:
        histogram.add(t["histogram"])
        for code, (count, message) in t["errors"].items():
            entry = errors.setdefault(code, {"count": 0, "message": message})
            entry["count"] += count
    statements = []
    for index, (name, text) in enumerate(sql):
        parts = [t["statements"][index] for t in totals]
        merged = new_histogram()
        for part in parts:
            merged.add(part["histogram"])
        statements.append(
            StatementResult(
                name=name,
                sql=text,
                executions=sum(p["executions"] for p in parts),
                failures=sum(p["failures"] for p in parts),
                rows=sum(p["rows"] for p in parts),
                latency=latency(merged, sum(p["sum_us"] for p in parts)),
            )
        )
    transactions = sum(t["transactions"] for t in totals)
    failed = sum(t["failed"] for t in totals)
    queries = sum(t["queries"] for t in totals)
    return {
        "duration_s": round(seconds, 3),
        "transactions": transactions,
        "failed_transactions": failed,
        "queries": queries,
        "tps": round((transactions - failed) / seconds, 2),
        "qps": round(queries / seconds, 2),
        "latency": latency(histogram, sum(t["sum_us"] for t in totals)),
        "errors": errors,
        "statements": statements,
    }
