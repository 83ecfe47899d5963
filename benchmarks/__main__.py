"""`make bench`: every benchmark, printed as tables. Compare rows of one run, not runs of different days.

The queue and latency benchmarks run on PostgreSQL and, when a MySQL/MariaDB server answers (MYSQL_TEST_URL,
else root@127.0.0.1:3306), on it too: both engines in one table per measure (an ``engine`` column).
"""

from __future__ import annotations

import importlib
import platform
import sys
import time

from benchmarks.report import print_table

SUITES = ["bench_queue", "bench_dispatch", "bench_flaky", "bench_webhook", "bench_http", "bench_coldstart",
          "bench_latency", "bench_ui", "bench_schedules", "bench_controllers"]


def main(selected: list[str]) -> int:
    print(f"# jenkins-dispatch benchmarks — {platform.python_version()}, {platform.machine()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    everything = time.perf_counter()
    for name in selected or SUITES:
        module = importlib.import_module(f"benchmarks.{name}")
        started = time.perf_counter()
        results = module.run()
        if isinstance(results, list):
            results = {name: results}
        for title, rows in results.items():
            print_table(title, rows)
        print(f"({name}: {time.perf_counter() - started:.0f} s)")
        sys.stdout.flush()
    print(f"\n(all: {time.perf_counter() - everything:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
