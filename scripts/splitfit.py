#!/usr/bin/env python3
"""splitfit.py: fits the split cost model's constants (split.go) to the runs
of device-run.sh's splitgrid step.

    tar xzf splitgrid.tgz && python3 scripts/splitfit.py splitgrid [--sms 132]

Every CSV in the directory is one `gdn bench` run with a forced output tile
(--variant), transfer tile (--transfer-tile) and segment length
(--segments), or unsplit (--segments -1). The model is split.go's splitTime
and unsplitTime:

    split:   launch + X_xt * L * w1 + scan * k + O_ot * max(L, w3 * mean segment) + wave * (w1 + w3 - 1)
    unsplit: U_t * max(L, waves * mean sequence)   (one wave; more waves use plan.go's chunkTime)

with w1 and w3 the waves of CTAs of the transfer and output passes and k the
longest chain of segments. The constants are fitted by least squares on the
relative error (each run weighs the same whatever its length). It prints
them as split.go names them, every run's model over measured time, and, per
case, the fastest run beside the one the model would pick among the runs.
Standard library only.
"""

import argparse
import csv
import glob
import math
import os
import sys

CHUNK = 64
FULL_GPU_CHUNK = {1: 2.2, 2: 4.2}  # plan.go chunkTime64 / chunkTime128: grids of several waves

NAMES = [
    ("transferChunkTime64", "x1"),
    ("transferChunkTime128", "x2"),
    ("outputChunkTime64", "o1"),
    ("outputChunkTime128", "o2"),
    ("oneWaveChunkTime64", "u1"),
    ("oneWaveChunkTime128", "u2"),
    ("waveTime", "wave"),
    ("scanStepTime", "scan"),
    ("splitLaunchTime", "launch"),
]


def seq_lengths(row):
    """The case's sequence lengths from the CSV's lens column ("8192",
    "16384x2"), or None for a form this script does not read."""
    lens = row["lens"].strip()
    if "x" in lens:
        n, _, k = lens.partition("x")
        if n.isdigit() and k.isdigit():
            return [int(n)] * int(k)
        return None
    return [int(lens)] if lens.isdigit() else None


def run_of(path, row):
    """(case, hv, lengths, output consumers, transfer consumers, segment
    chunks or 0, measured us) of one CSV row."""
    lengths = seq_lengths(row)
    if lengths is None:
        print(f"{path}: case {row['case']}: lens {row['lens']!r} not read, skipped", file=sys.stderr)
        return None
    variant = row["variant"]
    nc = 2 if variant.endswith("bv128") else 1
    plan = row["plan"]
    ls, xc = 0, nc
    if "split=" in plan:
        ls = int(plan.split("split=")[1].split()[0].split("x")[1])
        if "transfer-tile=" in plan:
            xc = int(plan.split("transfer-tile=")[1].split()[0]) // 64
    return row["case"], int(row["hv"]), tuple(lengths), nc, xc, ls, float(row["median_ms"]) * 1000


def features(hv, lengths, nc, xc, ls, sms):
    """The model's terms of one run: a dict of feature -> multiplier, and
    the part of its time with a fixed constant (multi-wave unsplit grids)."""
    chunks = [(l + CHUNK - 1) // CHUNK for l in lengths]
    n = len(chunks)
    if ls == 0:
        ctas = n * hv * (2 // nc)
        waves = math.ceil(ctas / sms)
        chain = max(max(chunks), waves * sum(chunks) / n)
        if waves == 1:
            return {f"u{nc}": chain}, 0.0
        return {}, FULL_GPU_CHUNK[nc] * chain
    segs = sum(max(1, math.ceil(l / ls)) for l in chunks)
    chain = max(max(1, math.ceil(l / ls)) for l in chunks)
    longest = max(min(l, ls) for l in chunks)
    total = sum(chunks)
    transfer = segs - n
    w1 = math.ceil(transfer * hv * (2 // xc) * 2 / sms)
    w3 = math.ceil(segs * hv * (2 // nc) / sms)
    out = max(longest, w3 * total / segs)
    return {f"x{xc}": ls * w1, "scan": chain, f"o{nc}": out, "wave": w1 + w3 - 1, "launch": 1}, 0.0


def least_squares(rows, rhs):
    """Solves min |A x - b| by the normal equations (small, well-posed)."""
    n = len(rows[0])
    m = [[sum(r[i] * r[j] for r in rows) for j in range(n)] + [sum(r[i] * y for r, y in zip(rows, rhs))] for i in range(n)]
    for i in range(n):
        p = max(range(i, n), key=lambda k: abs(m[k][i]))
        m[i], m[p] = m[p], m[i]
        if m[i][i] == 0:
            continue
        for k in range(n):
            if k != i:
                f = m[k][i] / m[i][i]
                m[k] = [a - f * b for a, b in zip(m[k], m[i])]
    return [m[i][n] / m[i][i] if m[i][i] else 0.0 for i in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the splitgrid directory (CSV files of gdn bench)")
    ap.add_argument("--sms", type=int, default=132, help="SMs of the GPU the runs were on")
    args = ap.parse_args()
    runs = []
    for path in sorted(glob.glob(os.path.join(args.dir, "*.csv"))):
        with open(path) as f:
            for row in csv.DictReader(f):
                r = run_of(path, row)
                if r:
                    runs.append(r)
    runs = sorted(set(runs))
    if not runs:
        sys.exit(f"splitfit: no runs in {args.dir}")
    terms = [short for _, short in NAMES]
    used = sorted({k for r in runs for k in features(r[1], r[2], r[3], r[4], r[5], args.sms)[0]}, key=terms.index)
    a, b = [], []
    for case, hv, lengths, nc, xc, ls, t in runs:
        f, fixed = features(hv, lengths, nc, xc, ls, args.sms)
        a.append([f.get(k, 0.0) / t for k in used])
        b.append(1.0 - fixed / t)
    par = dict(zip(used, least_squares(a, b)))

    def model(r):
        f, fixed = features(r[1], r[2], r[3], r[4], r[5], args.sms)
        return fixed + sum(par[k] * v for k, v in f.items())

    print(f"{len(runs)} runs on {args.sms} SMs; constants (us), as split.go names them:")
    for name, short in NAMES:
        if short in par:
            print(f"\t{name:22s} = {par[short]:.2f}")
    worst = max(runs, key=lambda r: abs(model(r) / r[6] - 1))
    print(f"worst run: {worst[0]} tile {64 * worst[3]} transfer {64 * worst[4]} segments {worst[5]}: "
          f"model {model(worst):.1f} us, measured {worst[6]:.1f} us ({model(worst) / worst[6] - 1:+.1%})")
    print("\ncase           fastest run (tile, transfer, segments)   us    model's pick                  us   over fastest")
    for case in sorted({r[0] for r in runs}):
        rs = [r for r in runs if r[0] == case]
        best, pick = min(rs, key=lambda r: r[6]), min(rs, key=model)
        desc = lambda r: f"{64 * r[3]}, {64 * r[4]}, {r[5] or 'unsplit'}"
        print(f"{case:14s} {desc(best):34s} {best[6]:7.1f}    {desc(pick):24s} {pick[6]:7.1f}   {pick[6] / best[6]:.2f}x")


if __name__ == "__main__":
    main()
