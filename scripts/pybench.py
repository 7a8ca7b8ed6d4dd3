#!/usr/bin/env python3
"""pybench.py: the full forward through the Python package, timed beside
`gdn bench --full` and FLA's chunk_gated_delta_rule, on the same card.

    make python
    .bin/gdn bench --full --cases q35_4kx8,tp8_32k --csv full.csv
    PYTHONPATH=python:FLA python3 scripts/pybench.py --bench-csv full.csv --cases q35_4kx8,tp8_32k

Each case is a row of the benchmark suite (docs/BENCH.md) with bench
--full's inputs: q and k L2-normalised beforehand (no norm in the call),
v ~ N(0, 1) in bf16, the raw per-token log-gate logsigmoid(N(0, 1)) / 16
(0 on every fourth value head) in float32, beta = sigmoid(N(0, 1)) in
float32, h0 ~ N(0, 1), the final state returned. Equal-length sequences go
as a batch, others packed with cu_seqlens. Like the bench, a case whose
inputs are under 120 MiB gets three input sets, used in turn.

Timed, each with CUDA events, the median over --reps rounds of `calls`
back-to-back calls (20 calls under 0.2 ms, else 5, as the bench's graphs):
- gdn eager: gdn.chunk_gated_delta_rule called from Python, as a user
  calls it (argument checks, output allocation, the libgdn call), with
  the GPU busy (torch.cuda._sleep) while the round is issued, as in a
  model whose host code runs ahead of the GPU: the time is the GPU's,
  launch gaps between the calls included, not the host's;
- gdn from idle: the same round on an idle GPU, the start event recorded
  before the first call is issued, so the host's latency to the first
  kernel counts (spread over the round's calls);
- host us: the host's time to issue one call (Python, libgdn, driver);
- gdn graph: the same calls captured once into a torch.cuda.graph and
  replayed, with the GPU busy ahead as for gdn eager (timed from idle,
  this column was once 7% over the bench, unexplained);
- FLA: fla.ops.gated_delta_rule.chunk_gated_delta_rule, eager (GPU busy
  ahead, as gdn eager), under torch.no_grad() (skipped when FLA is not
  importable).
The table gives bench --full's median from the CSV, each time, gdn eager
over the bench (within 5% is the aim), FLA over gdn eager, and the error
ratio of gdn's o against FLA's (a check that both computed the same).
"""
import argparse
import csv
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import gdn

try:
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_chunk
    FLA_MISSING = ""
except ImportError as e:
    fla_chunk = None
    FLA_MISSING = f" ({type(e).__name__}: {e})"

# The benchmark suite (ref/suite.go, docs/BENCH.md): name -> (Hq, Hv, lens).
# scripts/pybench_test.go checks that this table matches ref.Suite.
SUITE = {
    "tp8_32k": (2, 8, [32768]),
    "tp8_8k": (2, 8, [8192]),
    "tp8_2k": (2, 8, [2048]),
    "tp4_32k": (4, 16, [32768]),
    "tp2_32k": (8, 32, [32768]),
    "tp2_16kx2": (8, 32, [16384, 16384]),
    "q35_4kx8": (16, 32, [4096] * 8),
    "q35_1kx8": (16, 32, [1024] * 8),
    "q397_32k": (16, 64, [32768]),
    "q397_4kx8": (16, 64, [4096] * 8),
    "sym32_8kx4": (32, 32, [8192] * 4),
    "chain_equal": (4, 4, [16384]),
    "short_tail_state": (16, 32, [300]),
    "varlen_mix": (16, 32, [7000, 33, 1, 4096, 511, 2048, 64, 129]),
}
D = 128
ROTATE_BELOW = 120 << 20  # bytes: bench's rotateBelowBytes
SHORT_MS, SHORT_CALLS, LONG_CALLS = 0.2, 20, 5  # bench's graph sizes


def inputs(hq, hv, lens, seed):
    """One input set of bench --full's recipe, on the GPU."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    equal = len(set(lens)) == 1
    B, T = (len(lens), lens[0]) if equal else (1, sum(lens))

    def normal(*shape):
        return torch.randn(*shape, generator=gen, device="cuda")

    g = F.logsigmoid(normal(B, T, hv)) / 16
    g[:, :, ::4] = 0
    x = dict(q=F.normalize(normal(B, T, hq, D), dim=-1).bfloat16(),
             k=F.normalize(normal(B, T, hq, D), dim=-1).bfloat16(),
             v=normal(B, T, hv, D).bfloat16(), g=g, beta=torch.sigmoid(normal(B, T, hv)),
             initial_state=normal(len(lens), hv, D, D), output_final_state=True)
    cpu = None
    if not equal:
        cpu = [0]
        for n in lens:
            cpu.append(cpu[-1] + n)
        x["cu_seqlens"] = torch.tensor(cpu, dtype=torch.int64, device="cuda")
    return x, cpu


SLEEP_MS = 4.0  # the busy lead-in, at least: and at least twice a round's host time


def sleep_cycles_per_ms():
    """torch.cuda._sleep's cycles in a millisecond on this GPU, measured."""
    n = 1 << 21
    torch.cuda._sleep(n)  # load the kernel
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(n)
    end.record()
    end.synchronize()
    return n / start.elapsed_time(end)


def median_ms(run, calls, reps, busy=False, host=None):
    """The median over reps of (the time of run(), which makes calls calls)
    / calls. busy: keep the GPU busy for SLEEP_MS before the start event,
    so that run() is issued while the GPU works and the events time the
    GPU alone. host, a list: gets each round's host time to issue run(),
    in microseconds a call."""
    cycles = 0
    if busy:
        # The lead-in must outlast the host's issuing of the round, or the
        # GPU idles inside the timed region: size it from an untimed round.
        t0 = time.perf_counter()
        run()
        round_ms = (time.perf_counter() - t0) * 1e3
        torch.cuda.synchronize()
        cycles = int(max(SLEEP_MS, 2 * round_ms) * sleep_cycles_per_ms())
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if busy:
            torch.cuda._sleep(cycles)
        start.record()
        t0 = time.perf_counter()
        run()
        if host is not None:
            host.append((time.perf_counter() - t0) * 1e6 / calls)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def time_case(name, reps):
    hq, hv, lens = SUITE[name]
    tokens = sum(lens)
    nbytes = 2 * tokens * D * (2 * hq + hv) + 4 * (2 * tokens * hv + len(lens) * hv * D * D)
    sets = [inputs(hq, hv, lens, seed) for seed in range(3 if nbytes < ROTATE_BELOW else 1)]

    def gdn_call(i):
        x, cpu = sets[i % len(sets)]
        return gdn.chunk_gated_delta_rule(**x, cu_seqlens_cpu=cpu)

    def fla_call(i):
        x, _ = sets[i % len(sets)]
        return fla_chunk(**x)

    row = {"case": name}
    with torch.no_grad():
        for i in range(6):  # compile or load, then warm
            gdn_call(i)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(6):
            gdn_call(i)
        end.record()
        end.synchronize()
        calls = SHORT_CALLS if start.elapsed_time(end) / 6 < SHORT_MS else LONG_CALLS
        round_ = lambda: [gdn_call(i) for i in range(calls)]  # noqa: E731
        host = []
        row["eager"] = median_ms(round_, calls, reps, busy=True, host=host)
        row["host_us"] = statistics.median(host)
        row["idle"] = median_ms(round_, calls, reps)

        graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            gdn_call(0)  # torch warms a side stream before capture
        torch.cuda.current_stream().wait_stream(stream)
        try:
            with torch.cuda.graph(graph):
                for i in range(calls):
                    gdn_call(i)
            row["graph"] = median_ms(graph.replay, calls, reps, busy=True)
        except (RuntimeError, gdn.GdnError) as e:  # the eager and FLA times still count
            print(f"{name}: capture failed: {e}", file=sys.stderr)

        if fla_chunk is not None:
            for i in range(6):
                fla_call(i)
            row["fla"] = median_ms(lambda: [fla_call(i) for i in range(calls)], calls, reps, busy=True)
            o, _ = gdn_call(0)
            of, _ = fla_call(0)
            row["err"] = ((o.double() - of.double()).norm() / of.double().norm()).item()
    return row


def bench_medians(path):
    """case -> median ms of bench --full's CSV (full-forward rows only)."""
    out = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r.get("forward", "full") == "full" and r.get("l2norm", "false") in ("false", "0", ""):
                out[r["case"]] = float(r["median_ms"])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default="q35_4kx8,tp8_32k", help="suite cases, comma-separated")
    p.add_argument("--bench-csv", help="gdn bench --full's CSV of the same cases, same card")
    p.add_argument("--reps", type=int, default=30)
    a = p.parse_args()
    names = a.cases.split(",")
    for n in names:
        if n not in SUITE:
            sys.exit(f"pybench: no suite case {n} (have {', '.join(SUITE)})")
    bench = bench_medians(a.bench_csv) if a.bench_csv else {}
    print(f"{torch.cuda.get_device_name()}; FLA {'importable' if fla_chunk else 'not importable' + FLA_MISSING}")
    print(f"{'case':12s} {'bench ms':>9s} {'eager ms':>9s} {'graph ms':>9s} {'eager/bench':>11s} "
          f"{'idle ms':>9s} {'host us':>8s} {'FLA ms':>9s} {'FLA/eager':>9s} {'o vs FLA':>9s}")
    for n in names:
        r = time_case(n, a.reps)
        b = bench.get(n)

        def fmt(v, spec):
            return format(v, spec) if v is not None else "-"
        print(f"{n:12s} {fmt(b, '9.4f')} {r['eager']:9.4f} {fmt(r.get('graph'), '9.4f')} "
              f"{fmt(r['eager'] / b if b else None, '11.3f')} {r['idle']:9.4f} {r['host_us']:8.1f} {fmt(r.get('fla'), '9.4f')} "
              f"{fmt(r['fla'] / r['eager'] if 'fla' in r else None, '9.2f')} {fmt(r.get('err'), '9.2e')}")


if __name__ == "__main__":
    main()
