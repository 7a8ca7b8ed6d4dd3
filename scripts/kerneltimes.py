#!/usr/bin/env python3
"""kerneltimes.py: each kernel's time in one gdn call, from device-run.sh's
kerneltimes step (ncu --clock-control none --csv --metrics ... over one
`gdn bench --cases CASE` call; the CSV rows follow the bench's own output).

    python3 scripts/kerneltimes.py tp2_32k.csv q397_32k.csv ...

Prints, per file (named for its case), every kernel and grid in the order
of its first launch (a split call's transfer and output passes are the
same kernel on different grids): how many launches ncu saw (the bench's warm-up and timed
calls), the median duration in microseconds at the GPU's own clocks, and
the median DRAM and issue-slot use; then the sum of the medians, one
call's kernel time (launch gaps and overlap aside). That is how
the performance log's v30 (docs/perf/v29-v30.md) found where the split and
BV 64 rows' time goes.

From device-run.sh's profile step (its CSVs also hold the tensor pipe's
activity, warps eligible and resident a scheduler, achieved occupancy and
the stall reasons) each kernel's line also has the tensor pipe's %, the
eligible / resident warps a scheduler and the achieved occupancy %, and
a line below it with the leading stall reasons (medians of warps stalled
per issued instruction), largest first: what explains a row that misses
its target (docs/perf/v31-v32.md, v32).
Standard library only.
"""

import csv
import os
import statistics
import sys

DURATION = "gpu__time_duration.sum"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
ISSUE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
# The profile step's metrics.
TENSOR = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
ELIGIBLE = "smsp__warps_eligible.avg.per_cycle_active"
RESIDENT = "smsp__warps_active.avg.per_cycle_active"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
STALLS_SHOWN = 6


def number(text):
    """A metric value as ncu prints it ("182,304") as a float; NaN for one
    it could not collect ("n/a"), which then shows as nan."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return float("nan")


def launches(path):
    """{(launch id, kernel, grid): {metric: value}} from one ncu CSV."""
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        sys.exit(f"{path}: no ncu CSV header (\"ID\",...): did ncu profile any kernel?")
    rows = list(csv.reader(lines[start:]))
    head = rows[0]
    at = {name: head.index(name) for name in ("ID", "Kernel Name", "Grid Size", "Metric Name", "Metric Value")}
    out = {}
    for row in rows[1:]:
        if len(row) < len(head):
            continue
        key = (int(row[at["ID"]]), row[at["Kernel Name"]], row[at["Grid Size"]].replace(" ", ""))
        out.setdefault(key, {})[row[at["Metric Name"]]] = number(row[at["Metric Value"]])
    return out


def stalls(med, names):
    """The leading stall reasons of one kernel and grid, "reason value"
    (warps stalled per issued instruction), largest first."""
    got = [(med(n), n[len(STALL_PREFIX):-len(STALL_SUFFIX)]) for n in names]
    got = sorted((x for x in got if x[0] == x[0]), key=lambda x: -x[0])  # (NaN: none collected)
    return ", ".join(f"{reason} {value:.2f}" for value, reason in got[:STALLS_SHOWN])


def summary(path):
    """The lines printed for one file."""
    per = {}
    for (_, kernel, grid), m in sorted(launches(path).items()):
        per.setdefault((kernel, grid), []).append(m)
    case = os.path.splitext(os.path.basename(path))[0]
    profiled = any(TENSOR in m for ms in per.values() for m in ms)
    head = f"  {'kernel':<24} {'grid':<14} {'launches':>8} {'us':>9} {'DRAM %':>7} {'issue %':>8}"
    if profiled:
        head += f" {'tensor %':>9} {'elig/res':>9} {'occup %':>8}"
    lines = [f"== {case}", head]
    total = 0.0
    for (kernel, grid), ms in per.items():
        med = lambda name: statistics.median(m[name] for m in ms if name in m) if any(name in m for m in ms) else float("nan")
        us = med(DURATION) / 1000
        total += us
        line = f"  {kernel[:24]:<24} {grid[:14]:<14} {len(ms):>8} {us:>9.1f} {med(DRAM):>7.1f} {med(ISSUE):>8.1f}"
        if profiled:
            warps = f"{med(ELIGIBLE):.2f}/{med(RESIDENT):.2f}"
            line += f" {med(TENSOR):>9.1f} {warps:>9} {med(OCCUPANCY):>8.1f}"
        lines.append(line)
        names = sorted({n for m in ms for n in m if n.startswith(STALL_PREFIX) and n.endswith(STALL_SUFFIX)})
        if names:
            lines.append(f"    stalls: {stalls(med, names)}")
    lines.append(f"  {'sum of medians':<39} {'':>8} {total:>9.1f}")
    return lines


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        print("\n".join(summary(path)))


if __name__ == "__main__":
    main()
