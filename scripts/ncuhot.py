#!/usr/bin/env python3
"""ncuhot.py: where a kernel's warps wait, from the per-instruction CSV of
device-run.sh's ncu step (ncu --page source --csv --print-source sass).

    python3 scripts/ncuhot.py ncu-gdn_scan-chain_equal.csv [--top 25] [--context 3]

Prints the stall samples by reason (share of all samples), then the
instructions with the most samples, each with its reasons and the
instructions just before it (a stall is charged to the instruction that
waits: the one that produced what it waits for is usually a few lines up;
for a long-scoreboard stall, the load whose register it reads). Standard
library only.
"""

import argparse
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"


def read(path):
    """The CSV's header and rows (the first line names the kernel)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    for i, row in enumerate(rows):
        if SAMPLES in row:
            return row, rows[i + 1 :]
    sys.exit(f"{path}: no column {SAMPLES!r} (not an ncu source-page CSV?)")


def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", help="the source page CSV of one kernel")
    ap.add_argument("--top", type=int, default=25, help="instructions to list")
    ap.add_argument("--context", type=int, default=3, help="instructions shown before each")
    args = ap.parse_args()

    hdr, rows = read(args.csv)
    col = {h: i for i, h in enumerate(hdr)}
    src, samp = col["Source"], col[SAMPLES]
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(num(r[samp]) for r in rows if len(r) > samp)
    if total == 0:
        sys.exit("no stall samples")
    print(f"{len(rows)} instructions, {total:.0f} samples")
    by = sorted(((sum(num(r[col[h]]) for r in rows if len(r) > col[h]), h) for h in reasons), reverse=True)
    for n, h in by:
        if n / total >= 0.01:
            print(f"  {h[len('stall_'):]:<16} {100 * n / total:5.1f}%")
    print()
    ranked = sorted(range(len(rows)), key=lambda i: -num(rows[i][samp]) if len(rows[i]) > samp else 0)
    for i in ranked[: args.top]:
        r = rows[i]
        n = num(r[samp])
        if n == 0:
            break
        why = ", ".join(
            f"{h[len('stall_'):]} {num(r[col[h]]):.0f}" for h in reasons if num(r[col[h]]) > 0
        )
        print(f"{100 * n / total:5.1f}%  #{i:<5} {r[src].strip()}    [{why}]")
        for j in range(max(0, i - args.context), i):
            print(f"        #{j:<5} {rows[j][src].strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
