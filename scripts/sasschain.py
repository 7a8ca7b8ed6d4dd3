#!/usr/bin/env python3
"""sasschain.py: what a kernel's warpgroups do between rounds of wgmma, from
its SASS: the code that runs while a round's products are in flight, and
the code between a round's wait and the next round's first product (the
chain, where every instruction is latency the tensor pipe sits out).

    gdn warmup --arch sm_90a --all --strict --cache-dir DIR
    python3 scripts/sasschain.py --cache DIR gdn_hopper_bf16_fused_nonorm_bv128
    python3 scripts/sasschain.py --sass FILE.sass [--function SUBSTRING]

With --cache, the variant's entry is read from a disk cache of compiled
kernels (jit/disk.go's format), its cubin disassembled by cuobjdump
(--cuobjdump, default: cuobjdump on PATH; docs/TOOLCHAIN.md says where the
development machine gets one). With --sass, the text of `cuobjdump -sass`
is read as is, and --function picks the function whose name contains the
substring (default: the only one, or the first).

A round is a WARPGROUP.ARRIVE, the HGMMA after it up to the one that
commits the group (gsb0), then its WARPGROUP.DEPBAR. For each round it
prints three stretches, with the instruction count by class:
  issue      between the ARRIVE and the committing HGMMA (the products
             themselves, and what ptxas interleaved with them);
  in flight  between the committing HGMMA and the DEPBAR;
  after wait between the DEPBAR and the next round's ARRIVE.
Long "after wait" stretches that hold branches or barriers are usually
the loop's end, a role's switch or the kernel's epilogue, not one chain.
Standard library only.
"""

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

CLASSES = [
    ("hgmma", ("HGMMA",)),
    ("load", ("LDS", "LDSM", "LDG", "LDL", "LDC", "ULDC", "LD")),
    ("store", ("STS", "STSM", "STG", "STL", "ST")),
    ("float", ("FMUL", "FFMA", "FADD", "FMNMX", "MUFU", "F2FP", "FSETP", "FSEL", "HADD2", "HMUL2", "HFMA2", "F2F", "I2F", "F2I")),
    ("sync", ("BAR", "SYNCS", "DEPBAR", "WARPSYNC", "WARPGROUP", "MEMBAR", "FENCE", "ERRBAR", "ELECT", "VOTE", "SHFL")),
    ("branch", ("BRA", "BSSY", "BSYNC", "EXIT", "RET", "CALL", "JMP", "BREAK")),
    ("tma", ("UTMALDG", "UTMASTG", "UBLKCP", "UTMACMDFLUSH", "UTMACCTL")),
]

INSN = re.compile(r"/\*([0-9a-f]{4,6})\*/\s+(.*?)\s*;")


def mnemonic(text):
    """An instruction's mnemonic with its modifiers, without a predicate."""
    words = text.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def opcode(text):
    """An instruction's opcode, without a predicate or modifiers."""
    return mnemonic(text).split(".")[0]


def klass(text):
    op = opcode(text)
    for name, ops in CLASSES:
        if op in ops:
            return name
    return "int"  # address arithmetic, moves, predicates, uniform datapath


def functions(sass):
    """{name: [instruction text]} of cuobjdump -sass output, in order."""
    out = {}
    for part in re.split(r"\n\s*Function : ", "\n" + sass)[1:]:
        name, _, body = part.partition("\n")
        out[name.strip()] = [m.group(2) for m in INSN.finditer(body)]
    return out


def rounds(insns):
    """[(arrive, commit, depbar)] indices of each round, in order."""
    found, arrive, commit = [], None, None
    for i, text in enumerate(insns):
        op = mnemonic(text)
        if op.startswith("WARPGROUP.ARRIVE"):
            arrive, commit = i, None
        elif op.startswith("HGMMA") and "gsb0" in text and arrive is not None:
            commit = i
        elif op.startswith("WARPGROUP.DEPBAR") and arrive is not None and commit is not None:
            found.append((arrive, commit, i))
            arrive, commit = None, None
    return found


def summary(stretch):
    counts = {}
    for text in stretch:
        k = klass(text)
        counts[k] = counts.get(k, 0) + 1
    order = [name for name, _ in CLASSES] + ["int"]
    return ", ".join(f"{k} {counts[k]}" for k in order if k in counts) or "-"


def report(name, insns):
    lines = [f"{name}: {len(insns)} instructions"]
    found = rounds(insns)
    if not found:
        return "\n".join(lines + ["  no wgmma rounds (WARPGROUP.ARRIVE ... HGMMA gsb0 ... WARPGROUP.DEPBAR)"])
    for r, (a, c, d) in enumerate(found):
        nxt = found[r + 1][0] if r + 1 < len(found) else len(insns)
        issue, flight, after = insns[a + 1 : c + 1], insns[c + 1 : d], insns[d + 1 : nxt]
        hg = sum(1 for t in issue if opcode(t) == "HGMMA")
        lines.append(f"  round {r} at #{a}: {hg} HGMMA")
        lines.append(f"    issue      {len(issue):4d}  {summary(issue)}")
        lines.append(f"    in flight  {len(flight):4d}  {summary(flight)}")
        lines.append(f"    after wait {len(after):4d}  {summary(after)}")
    return "\n".join(lines)


def cache_cubins(cache):
    """{variant: cubin} of the entries in a gdn disk cache folder (the
    first of a variant's, in name order; PTX entries left out)."""
    if not os.path.isdir(cache):
        sys.exit(f"{cache}: not a folder (gdn warmup --all --cache-dir {cache} fills one)")
    out = {}
    for entry in sorted(os.listdir(cache)):
        path = os.path.join(cache, entry)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            b = f.read()
        if len(b) < 56 or b[:4] != b"GDNK":
            continue
        _, flags, meta_len, img_len = struct.unpack_from("<IIIQ", b, 4)
        meta = json.loads(b[56 : 56 + meta_len])
        if not flags & 1:
            out.setdefault(meta.get("name"), b[56 + meta_len : 56 + meta_len + img_len])
    return out


def disassemble(cubin, cuobjdump, who="sasschain"):
    """cuobjdump -sass of a cubin (cuobjdump: a path, or None for PATH's)."""
    tool = cuobjdump or shutil.which("cuobjdump")
    if not tool:
        sys.exit(f"{who}: no cuobjdump on PATH (--cuobjdump PATH; docs/TOOLCHAIN.md)")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, "-sass", f.name], check=True, capture_output=True, text=True).stdout


def cache_sass(cache, variant, cuobjdump):
    """The SASS of the variant's cubin in a gdn disk cache folder."""
    cubin = cache_cubins(cache).get(variant)
    if cubin is None:
        sys.exit(f"sasschain: no cubin of {variant!r} in {cache} (gdn warmup --all --cache-dir {cache} fills it)")
    return disassemble(cubin, cuobjdump)


def main():
    ap = argparse.ArgumentParser(description="What a kernel's warpgroups do between rounds of wgmma, from its SASS.")
    ap.add_argument("variant", nargs="?", help="the variant's name, with --cache")
    ap.add_argument("--cache", help="a gdn disk cache folder (gdn warmup --cache-dir)")
    ap.add_argument("--sass", help="a file of cuobjdump -sass output")
    ap.add_argument("--function", default="", help="with --sass: a substring of the function's name")
    ap.add_argument("--cuobjdump", help="the cuobjdump to run (default: on PATH)")
    args = ap.parse_args()
    if bool(args.cache) == bool(args.sass):
        ap.error("give one of --cache (with a variant) or --sass")
    if args.cache:
        if not args.variant:
            ap.error("--cache needs a variant's name")
        sass = cache_sass(args.cache, args.variant, args.cuobjdump)
    else:
        with open(args.sass) as f:
            sass = f.read()
    funcs = functions(sass)
    picked = [n for n in funcs if args.function in n]
    if not picked:
        sys.exit(f"sasschain: no function containing {args.function!r} (have {', '.join(funcs) or 'none'})")
    for name in picked:
        print(report(name, funcs[name]))


if __name__ == "__main__":
    main()
