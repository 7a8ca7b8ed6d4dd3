#!/usr/bin/env python3
"""ncuhot.py: where a kernel's warps wait, from the per-instruction CSV of
device-run.sh's ncu step (ncu --page source --csv --print-source sass).

    python3 scripts/ncuhot.py ncu-gdn_scan-chain_equal.csv [--top 25] [--context 3]
    python3 scripts/ncuhot.py CSV --ranges 0,467,1968,3704 [--per 16384]

Prints the stall samples by reason (share of all samples), then the
instructions with the most samples, each with its reasons and the
instructions just before it (a stall is charged to the instruction that
waits: the one that produced what it waits for is usually a few lines up;
for a long-scoreboard stall, the load whose register it reads). Standard
library only.

--roles splits the kernel at its setmaxnreg instructions (USETMAXREG: a
warp-specialised kernel's roles each begin with one, e.g. the consumers'
alloc to 192, the producers' dealloc to 64) and, for each part, gives its
share of the samples, its stall reasons and its --top instructions as
shares of that part's own samples: where a role's warps wait, without
finding its instruction range by hand. With the executed counts
(SourceCounters), each part also gives its instructions a warp: its
executed warp instructions over its setmaxnreg's (which every warp of
the role executes once; for a setmaxnreg.inc, which a warp retries until
the registers are free, the instruction after its retry loop's branch);
--chunks N divides them by each CTA's chunks, to read a role's
instructions a warp and chunk.

--ranges A,B,C,... sums instead by ranges of instruction indices (the #
numbers above: [A, B), [B, C), ...; find a role's code by its first
instructions, e.g. the consumers' setmaxnreg): each range's share of the
samples, its instructions executed (warp instructions; divided by --per,
e.g. CTAs x chunks x warps, to read them per warp and chunk), its top stall
reasons and its most executed opcodes. That is how the performance log's v22
(docs/perf/v20-v22.md) found where a chunk's issue slots went.
"""

import argparse
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


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
    ap.add_argument("--ranges", help="comma-separated instruction indices: sums by range instead")
    ap.add_argument("--per", type=float, default=1, help="divide executed counts by this (--ranges)")
    ap.add_argument("--roles", action="store_true", help="by role: the parts between setmaxnreg instructions")
    ap.add_argument("--chunks", type=float, default=0, help="--roles: each CTA's chunks, to give instructions a warp and chunk")
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
    if args.ranges:
        return ranges(rows, col, reasons, total, args)
    if args.roles:
        return roles(rows, col, reasons, total, args)
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


def opcode(source):
    """The opcode of a SASS line, without predicate and modifiers."""
    words = [w for w in source.split() if not w.startswith("@")]
    return words[0].split(".")[0] if words else ""


def ranges(rows, col, reasons, total, args):
    """Samples, executed instructions, reasons and opcodes by index range."""
    try:
        cuts = [int(x) for x in args.ranges.split(",")]
    except ValueError:
        sys.exit(f"--ranges {args.ranges!r}: want comma-separated instruction indices")
    if len(cuts) < 2 or cuts != sorted(cuts):
        sys.exit(f"--ranges {args.ranges!r}: want at least two indices, ascending")
    if EXECUTED not in col:
        sys.exit(f"no column {EXECUTED!r} (profile with the SourceCounters section)")
    src, samp, ex = col["Source"], col[SAMPLES], col[EXECUTED]
    for a, b in zip(cuts, cuts[1:]):
        part = rows[a:b]
        n = sum(num(r[samp]) for r in part)
        e = sum(num(r[ex]) for r in part) / args.per
        why = sorted(((sum(num(r[col[h]]) for r in part), h) for h in reasons), reverse=True)
        ops = {}
        for r in part:
            op = opcode(r[src])
            ops[op] = ops.get(op, 0) + num(r[ex]) / args.per
        top = sorted(ops.items(), key=lambda kv: -kv[1])[:8]
        print(f"#{a}-#{b}: {100 * n / total:5.1f}% of samples, {e:.1f} executed")
        print("    " + ", ".join(f"{h[len('stall_'):]} {100 * v / total:.1f}%" for v, h in why[:8] if v > 0))
        print("    " + ", ".join(f"{op} {v:.1f}" for op, v in top if v > 0))
    return 0


def roles(rows, col, reasons, total, args):
    """Each part between setmaxnreg instructions: its share of the samples,
    its reasons and its top instructions as shares of its own samples."""
    src, samp = col["Source"], col[SAMPLES]
    marks = [i for i, r in enumerate(rows) if len(r) > src and "SETMAXREG" in r[src]]
    if not marks:
        sys.exit("no setmaxnreg instruction (USETMAXREG): not a warp-specialised kernel? use --ranges")
    cuts = [0] + marks + [len(rows)]
    for a, b in zip(cuts, cuts[1:]):
        part = [i for i in range(a, b) if len(rows[i]) > samp]
        n = sum(num(rows[i][samp]) for i in part)
        head = rows[a][src].strip() if a in marks else "(the entry, before any setmaxnreg)"
        print(f"#{a}-#{b} {head}: {100 * n / total:.1f}% of samples{per_warp(rows, col, a, b, a in marks, args.chunks)}")
        if n == 0:
            print()
            continue
        why = sorted(((sum(num(rows[i][col[h]]) for i in part), h) for h in reasons), reverse=True)
        print("    " + ", ".join(f"{h[len('stall_'):]} {100 * v / n:.1f}%" for v, h in why[:8] if v > 0))
        for i in sorted(part, key=lambda i: -num(rows[i][samp]))[: args.top]:
            v = num(rows[i][samp])
            if v == 0:
                break
            before = f"   after #{i - 1} {rows[i - 1][src].strip()}" if i > a else ""
            print(f"  {100 * v / n:5.1f}%  #{i:<5} {rows[i][src].strip()}{before}")
        print()
    return 0


def per_warp(rows, col, a, b, marked, chunks):
    """", N instructions a warp (and chunk)" of part [a, b) that begins at a
    setmaxnreg, from the executed counts; "" without them."""
    if not marked or EXECUTED not in col:
        return ""
    ex = col[EXECUTED]
    src = col["Source"]
    w = a
    if "TRY_ALLOC" in rows[a][src]:
        # A warp retries setmaxnreg.inc until the registers are free: its
        # loop's branch back is the part's first, and what follows it runs
        # once a warp.
        w = next((i + 1 for i in range(a + 1, b - 1) if "BRA" in rows[i][src]), a)
    warps = num(rows[w][ex]) if len(rows[w]) > ex else 0
    if warps == 0:
        return ""
    n = sum(num(r[ex]) for r in rows[a:b] if len(r) > ex) / warps
    if chunks > 0:
        return f", {n / chunks:.0f} instructions a warp and chunk"
    return f", {n:.0f} instructions a warp"


if __name__ == "__main__":
    sys.exit(main())
