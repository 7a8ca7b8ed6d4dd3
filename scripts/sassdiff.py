#!/usr/bin/env python3
"""sassdiff.py: whether a change left the kernels' machine code as it was:
every variant's SASS in two gdn disk caches, instruction for instruction.

    git worktree add /tmp/base REV
    (cd /tmp/base && go build -tags gdndev -o /tmp/gdn-base ./cmd/gdn)
    go build -tags gdndev -o /tmp/gdn-new ./cmd/gdn
    /tmp/gdn-base warmup --arch sm_90a --all --strict --cache-dir /tmp/c-base
    /tmp/gdn-new warmup --arch sm_90a --all --strict --cache-dir /tmp/c-new
    python3 scripts/sassdiff.py /tmp/c-base /tmp/c-new [--cuobjdump PATH]

Each cache's cubins are disassembled by cuobjdump (docs/TOOLCHAIN.md says
where the development machine gets one) and compared by their
instructions' text, addresses and encodings left out: a change that only
moves code between functions the compiler inlines, or renames them, is
"the same". Prints the variants that differ (with their instruction
counts), those in one cache only, and how many are the same; exits 1 if
any differs or is missing from one side. That is how a refactoring of
production's kernels shows it changed none of them before a GPU runs
it. Standard library only.
"""

import argparse
import sys

from sasschain import cache_cubins, disassemble, functions


def instructions(cubin, cuobjdump):
    """The cubin's instructions' text, function by function in order."""
    out = []
    for name, insns in functions(disassemble(cubin, cuobjdump, "sassdiff")).items():
        out.append("FUNCTION " + name)
        out.extend(insns)
    return out


def main():
    ap = argparse.ArgumentParser(description="Compare every variant's SASS in two gdn disk caches.")
    ap.add_argument("old", help="a gdn disk cache folder (gdn warmup --all --cache-dir) of the build before")
    ap.add_argument("new", help="the same of the build after")
    ap.add_argument("--cuobjdump", help="the cuobjdump to run (default: on PATH)")
    args = ap.parse_args()
    old, new = cache_cubins(args.old), cache_cubins(args.new)
    if not old or not new:
        sys.exit(f"sassdiff: no cubin in {args.old if not old else args.new} (gdn warmup --all --cache-dir fills it)")
    same, differ = 0, []
    for name in sorted(set(old) & set(new)):
        a, b = instructions(old[name], args.cuobjdump), instructions(new[name], args.cuobjdump)
        if a == b:
            same += 1
        else:
            differ.append(name)
            print(f"differs: {name} ({len(a)} instructions before, {len(b)} after)")
    for name in sorted(set(old) - set(new)):
        print(f"only before: {name}")
    for name in sorted(set(new) - set(old)):
        print(f"only after: {name}")
    print(f"{same} of {len(set(old) | set(new))} variants the same, instruction for instruction")
    return 1 if differ or set(old) != set(new) else 0


if __name__ == "__main__":
    sys.exit(main())
