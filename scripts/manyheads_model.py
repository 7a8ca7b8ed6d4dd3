#!/usr/bin/env python3
"""manyheads_model.py: the cost model of docs/perf/many-heads-model.md.

    python3 scripts/manyheads_model.py [--check] [--table NAME]

Prints the page's tables (constants, calibration, what-ifs, today's chunk
by term, the chunk each line allows, candidates, budgets, DRAM, the first
device call's predictions); --check exits 1 if a calibration row is off by
more than 10%. A chunk (SM cycles) = R LAM + pipe + E C0 k + gate + KAPPA
I_prod; a row = the soft maximum of waves (T0 + chunks chunk) and its DRAM
time. The page defines each term and cites each number. Standard library
only.
"""

import argparse
import sys

from manyheads_data import *  # noqa: F401,F403 (the constants the page names)


def pair(t4k, t1k):
    """(us a chunk, us a wave) of a 4k/1k pair of two-wave rows (ms)."""
    t = (t4k - t1k) * 1e3 / (2 * 48)
    return t, t4k * 1e3 / 2 - 64 * t


def cyc(us_):
    return us_ * 1e-6 * CLOCK


def us(cycles):
    return cycles / CLOCK * 1e6


def q35(fw):  # today's (us a chunk, us a wave) in the forward fw
    return pair(MEASURED["q35_4kx8"][fw == "full"], MEASURED["q35_1kx8"][fw == "full"])


T0 = {fw: q35(fw)[1] for fw in FORWARDS}  # a wave's fixed cost, us
BASE = {fw: cyc(q35(fw)[0]) for fw in FORWARDS}  # today's chunk, cycles
# BV 64, one wave: tp2_16kx2 (256 chunks) against short_tail_state (5).
T64 = (MEASURED["tp2_16kx2"][0] - MEASURED["short_tail_state"][0]) * 1e3 / 251
T_FIRST64 = MEASURED["short_tail_state"][0] * 1e3 - 5 * T64
# Consumers alone (the fused kernel's, q35 pairs of v35's what-ifs).
T18 = cyc(pair(0.2880, 0.0873)[0])  # gate warp idle (what-if 18)
T6 = cyc(pair(0.3380, 0.1004)[0])  # with the gate warp (what-if 6)
GATE = T6 - T18
# BV 64 consumer alone: the full forward with both aux groups idle (v32
# what-if 8) less the preparation kernel (v31), one wave.
BV64_ALONE = sum(cyc((f * 1e3 - prep - T_FIRST64) / n)
                 for f, prep, n in ((1.0616, 336.5, 512), (0.5925 / 1.11, 163.8, 256))) / 2

# --- The chunk ----------------------------------------------------------------------

# A group's rounds, its own tensor-pipe cycles. Two groups (BV 128): U and
# O' (16 m64n64), Vn (4 m64n64), the update and the P term (4 m64n128 + 4
# m64n64). One group (BV 64): [U | O'] in two halves of d (4 m64n128
# each), Vn (8 m64n64), the P term and the update.
TWO = [16 * PIPE[64], 4 * PIPE[64], 4 * PIPE[128] + 4 * PIPE[64]]
TWO_NO_O = [8 * PIPE[64], 4 * PIPE[64], 4 * PIPE[128]]
ONE = [4 * PIPE[128], 4 * PIPE[128], 8 * PIPE[64], 4 * PIPE[64] + 4 * PIPE[128]]


# LAM and C0: two equations, R LAM + E k C0 = alone - pipe, for the BV 64
# chain alone (one group) and the fused chain alone without gate work (two
# groups in lockstep).
_a, _b, _r = (len(ONE), len(TWO)), (E_BV64, 2 * E_FUSED), (BV64_ALONE - sum(ONE), T18 - 2 * sum(TWO))
_det = _a[0] * _b[1] - _a[1] * _b[0]
LAM, C0 = (_r[0] * _b[1] - _r[1] * _b[0]) / _det, (_a[0] * _r[1] - _a[1] * _r[0]) / _det


def alone(rounds, elem, groups, k=None, gate=0.0):
    """The consumers' chunk without producers. k None: today's lockstep,
    every round waiting for all groups' products, the groups' element-wise
    work sharing the schedulers. Else a ping-pong: each chain waits for its
    own products only, pays a hand-over a round, and meets k - 1 other
    consumer warps on its schedulers; the pipe must still fit both."""
    if k is None:
        return len(rounds) * LAM + groups * sum(rounds) + elem * C0 * groups + gate
    chain = len(rounds) * (LAM + TURN) + sum(rounds) + elem * C0 * k + gate
    return max(chain, groups * sum(rounds) + 2 * len(rounds) * TURN)


def simulate_pingpong(rounds, gaps, gate, chunks=24, lam=None, c0=None, turn=None):
    """The two chains of a BV 128 CTA taking turns at the pipe, simulated
    (cycles a chunk, steady state). A group runs gap 0, round 0, gap 1,
    ...; group 0 first spends the gate warp's latency. A round joins the
    pipe's queue on its group's turn (turns alternate), the pipe runs the
    queue in order, the result is there LAM + TURN after its last product.
    Gaps are issue work, C0 cycles an instruction shared by the groups in a
    gap at once: k follows from how the gaps overlap. lam, c0 and turn
    replace LAM, C0 and TURN (manyheads_corrected.py's refit)."""
    LAM = globals()["LAM"] if lam is None else lam  # noqa: N806
    C0 = globals()["C0"] if c0 is None else c0  # noqa: N806
    TURN = globals()["TURN"] if turn is None else turn  # noqa: N806
    progs = []
    for g in (0, 1):
        steps = [("D", gate)] if g == 0 and gate else []
        for e, r in zip(gaps, rounds + [None]):
            steps += [("E", e)] + ([("R", r)] if r is not None else [])
        progs.append(steps)
    t, pc, left, until, turn = 0.0, [0, 0], [0.0, 0.0], [0.0, 0.0], 0
    state, done, starts, queue, inf = ["", ""], [0, 0], [], [], float("inf")

    def enter(g):
        kind, v = progs[g][pc[g]]
        state[g], left[g], until[g] = {"D": "delay", "E": "elem", "R": "issue"}[kind], float(v), t + v

    def advance(g):
        pc[g] += 1
        if pc[g] == len(progs[g]):
            pc[g], done[g] = 0, done[g] + 1
            if g == 0:
                starts.append(t)
        enter(g)

    enter(0)
    enter(1)
    while done[0] < chunks:
        moved = True
        while moved:
            moved = False
            for g in (0, 1):
                if state[g] == "issue" and turn == g:
                    queue.append([g, left[g]])
                    state[g], until[g], turn, moved = "wait", inf, 1 - g, True
                elif (state[g] in ("wait", "delay") and t >= until[g]) or (state[g] == "elem" and left[g] <= 1e-9):
                    advance(g)
                    moved = True
        rate = 1.0 / (C0 * max(1, state.count("elem")))
        dt = min([left[g] / rate for g in (0, 1) if state[g] == "elem"] +
                 [until[g] - t for g in (0, 1) if state[g] in ("wait", "delay") and until[g] < inf] +
                 [q[1] for q in queue[:1]])
        if queue:
            queue[0][1] -= dt
            if queue[0][1] <= 1e-9:
                until[queue.pop(0)[0]] = t + dt + LAM + TURN
        for g in (0, 1):
            if state[g] == "elem":
                left[g] -= dt * rate
        t += dt
    half = len(starts) // 2
    return (starts[-1] - starts[half]) / (len(starts) - 1 - half)


def alone_today(fw):
    return alone(TWO, E_CORE, 2) if fw == "core" else alone(TWO, E_FUSED, 2, gate=GATE)


def i_prod(fw):
    return I_CONV_CORE + I_AUX_CORE if fw == "core" else I_CONV_FUSED + I_AUX_FUSED


def kappa_fit(data):
    """Cycles a producer instruction costs the chain: least squares on the
    relative error over (base chunk, consumers alone, instructions)."""
    return sum((b - a) * i / b**2 for b, a, i in data) / sum(i * i / b**2 for b, a, i in data)


KAPPA = kappa_fit([(BASE[fw], alone_today(fw), i_prod(fw)) for fw in FORWARDS])
# BV 64's two aux groups cost the chain more an instruction: a fit of its
# own (the model counts no shared-memory traffic, their A2 build's and
# conversions').
KAPPA64 = kappa_fit([(cyc(T64), alone(ONE, E_BV64, 1), I_BV64)])


def today(fw):
    return alone_today(fw) + KAPPA * i_prod(fw)


def bv64(fw):
    return alone(ONE, E_BV64, 1) + KAPPA64 * (I_BV64 if fw == "core" else I_BV64_FULL)


def pingpong_alone(fw, k=None):
    """(a), consumers alone: simulated (k None) or at a given k."""
    gate = 0.0 if fw == "core" else GATE
    if k is None:
        return simulate_pingpong(TWO, GAPS_CORE if fw == "core" else GAPS_FUSED, gate)
    return alone(TWO, E_CORE if fw == "core" else E_FUSED, 2, k, gate)


def pingpong(fw, k=None):
    """(a): the two value-tile chains of a BV 128 CTA taking turns at the
    pipe, today's producers beside them, their chains the floor."""
    return max(pingpong_alone(fw, k) + KAPPA * i_prod(fw), FLOOR_CORE if fw == "core" else FLOOR_FUSED)


# (b): a group's rounds over 128 tokens: U and O' (16 m64n128), Vn (8
# m64n128: k is 128 tokens), the update and the P term (16 m64n128). The
# producers' work a token grows (gating, L and P are quadratic in the
# chunk; the 128 x 128 inverse by 64 x 64 blocks): 1.6x, and their chain
# with it (assumed); FIXED element-wise instructions a chunk pays once.
TWO_128 = [16 * PIPE[128], 8 * PIPE[128], 16 * PIPE[128]]
PROD_128, FIXED = 1.6, 40


def chunk128(fw):
    core = fw == "core"
    a = alone(TWO_128, 2 * (E_CORE if core else E_FUSED) - FIXED, 2, gate=0 if core else 2 * GATE) / 2
    return max(a + KAPPA * PROD_128 * i_prod(fw), PROD_128 * (FLOOR_CORE if core else FLOOR_FUSED))


# (c): the state in shared memory, stored after the update, read back
# before it, its fp16 copy stored for U and O' (16 + 16 + 8 vector
# accesses and their addresses: 48 instructions), with a fence and the
# group's barrier before U (one more exposed latency).
E_SMEM_STATE = 48


def smem_state(fw):
    return today(fw) + LAM + E_SMEM_STATE * C0 * 2


def cluster_pair(fw):
    """(c), the state split along its keys over a cluster pair: an SM's
    share of a head's chunk (two SMs a head), a bound that charges the
    exchange of U's and O''s partial sums only its round's latency and
    halves the producers. A CTA: U and O' over half of d (8 m64n64), Vn and
    the P term whole (4 + 4), the update of its half (4 m64n64)."""
    rounds = [8 * PIPE[64], 4 * PIPE[64], 8 * PIPE[64], 0]
    e = (E_CORE if fw == "core" else E_FUSED) - 48
    return 2 * (alone(rounds, e, 2, gate=0 if fw == "core" else GATE) + KAPPA * i_prod(fw) / 2)


# --- Rows ---------------------------------------------------------------------------


def bytes_of(case, core, no_o=False):
    """DRAM bytes of a forward: docs/BENCH.md's count (q and k once a key
    head, v, o, gates, h0, ht) and, in the core benchmark, A in fp32."""
    hq, hv, lens = CASES[case]
    tok = sum(lens)
    b = tok * 128 * (2 * hq + (1 if no_o else 2) * hv) * 2 + tok * hv * 8 + len(lens) * hv * 128 * 128 * 8
    return b + (tok * hv * 256 if core else 0)


def softmax(a, b):
    return (a**SOFT_P + b**SOFT_P) ** (1.0 / SOFT_P)


def greedy(work, first, later=None):
    """Makespan (us) of CTAs of the given work (us) started in launch order
    on the first free SM, each paying first (an SM's first CTA) or later."""
    free, used = [0.0] * SMS, [False] * SMS
    for w in work:
        i = free.index(min(free))
        free[i] += w + (later if used[i] and later is not None else first)
        used[i] = True
    return max(free)


def row_us(case, fw, chunk, persistent=False, no_o=False):
    """A row (us): BV 128 rows by waves of CTAs; BV 64 rows by CTAs in
    launch order, after the preparation kernel in the full forward; then
    the soft maximum with the DRAM time."""
    hq, hv, lens = CASES[case]
    chunks, t = [(n + 63) // 64 for n in lens], us(chunk)
    if case in BV128:
        w, n = -(-len(lens) * hv // SMS), chunks[0]
        sm = T0[fw] + (w - 1) * T_SWITCH + w * n * t if persistent else w * (T0[fw] + n * t)
    else:
        sm = greedy([c * t for c in chunks for _ in range(2 * hv)], T_FIRST64, T_SWITCH if persistent else None)
        if fw == "full":
            sm += sum(chunks) * hv * PREP_US * (1 if (hv // hq) % 4 == 0 else PREP_ONE_HEAD)
    return softmax(sm, bytes_of(case, fw == "core", no_o) / BW * 1e6)


class Design:
    """A design: its BV 128 chunk (cycles, a function of the forward),
    persistent or not, and whether it fits an SM."""

    def __init__(self, name, chunk, persistent=False, fits="yes"):
        self.name, self.chunk, self.persistent, self.fits = name, chunk, persistent, fits

    def row_ms(self, case, fw):
        """varlen_mix: the faster of BV 64 as today and this design at BV
        128 (its longest sequence alone is 110 chunks)."""
        if case in BV128:
            return row_us(case, fw, self.chunk(fw), self.persistent) / 1e3
        t = row_us(case, fw, bv64(fw), self.persistent)
        if fw == "core":
            hq, hv, lens = CASES[case]
            work = [((n + 63) // 64) * us(self.chunk(fw)) for n in lens for _ in range(hv)]
            t128 = greedy(work, T0[fw], T_SWITCH if self.persistent else None)
            t = min(t, softmax(t128, bytes_of(case, True) / BW * 1e6))
        return t / 1e3


DESIGNS = [
    Design("today (the model)", today),
    Design("(a) ping-pong, simulated", pingpong),
    Design("(a) ping-pong, k = 2", lambda fw: pingpong(fw, 2)),
    Design("(b) chunks of 128 tokens", chunk128, fits="no: 164 KB stages, 224+ registers"),
    Design("(c) the state in shared memory", smem_state, fits="no: one stage left"),
    Design("(c) the state over a cluster pair, bound", cluster_pair, fits="yes; no second chain"),
    Design("(d) persistent CTAs", today, persistent=True),
    Design("(a) + (d), simulated", pingpong, persistent=True),
    Design("(a) + (d), k = 2", lambda fw: pingpong(fw, 2), persistent=True),
]

# --- Tables: (title, header, rows) --------------------------------------------------
def pct(m, x):
    return f"{100.0 * (m / x - 1.0):+.1f}%"


def calibration():
    rows = []
    for fw in FORWARDS:
        for case in BV128 + ["varlen_mix", "tp2_16kx2", "q397_32k"]:
            m = row_us(case, fw, today(fw) if case in BV128 else bv64(fw)) / 1e3
            rows.append([f"{fw} {case} (ms)", m, MEASURED[case][fw == "full"]])
    for fw in FORWARDS:
        rows.append([f"{fw} chunk, q35 pair (us)", us(today(fw)), q35(fw)[0]])
    rows.append(["core BV 64 chunk, one wave (us)", us(bv64("core")), T64])
    return ("Calibration: today's kernels (v39, H200)", ["row", "model", "measured", "error"],
            [[r, f"{m:.4f}", f"{x:.4f}", pct(m, x)] for r, m, x in rows])


def whatifs():
    p = lambda a, b: pair(a, b)[0]  # noqa: E731
    a6, no_vn = alone_today("full"), [TWO[0], TWO[2]]
    rows = [
        ["19: consumers alone, no gate work, no O (us/chunk)", us(alone(TWO_NO_O, E_NO_O, 2)), p(0.2072, 0.0642)],
        ["core 9: consumers alone (us/chunk)", us(alone_today("core")), p(0.2745, 0.0859)],
        ["core 8: aux group idle (us/chunk)", us(alone_today("core") + KAPPA * I_CONV_CORE), p(0.2858, 0.0881)],
        ["5: aux group idle (us/chunk)", us(a6 + KAPPA * I_CONV_FUSED), p(0.3522, 0.1030)],
        ["36: half the preparation's products (us/chunk)",
         us(a6 + KAPPA * (I_CONV_FUSED - I_P_FUSED / 2 + I_AUX_FUSED / 2)), p(0.37835, 0.1091)],
        ["29: no O' and P products (us/chunk)",
         us(alone(TWO_NO_O, E_FUSED - 48, 2, gate=GATE) + KAPPA * i_prod("full")), p(0.3685, 0.1077)],
        ["32: no Vn product (us/chunk)",
         us(alone(no_vn, E_FUSED - E_PACK_VN, 2, gate=GATE) + KAPPA * i_prod("full")), p(0.3804, 0.1123)],
        ["34: consumers alone, no Vn product (us/chunk)", us(alone(no_vn, E_FUSED - E_PACK_VN, 2, gate=GATE)),
         p(0.32605, 0.09405)],
    ]
    for case, m6, m19 in (("sym32_8kx4", 0.3407, 0.2056), ("q397_4kx8", 0.6705, 0.4042)):
        rows.append([f"6 on {case} (ms)", row_us(case, "full", a6) / 1e3, m6])
        rows.append([f"19 on {case} (ms)", row_us(case, "full", alone(TWO_NO_O, E_NO_O, 2), no_o=True) / 1e3, m19])
    rows.append(["tensor pipe active, core q35_4kx8 (%)", 100 * (2 * sum(TWO) + 8 * PIPE[64]) / today("core"), 50.5])
    rows.append(["tensor pipe active, fused q35_4kx8 (%)", 100 * (2 * sum(TWO) + 18 * PIPE[64]) / today("full"), 43.8])
    return ("Out of sample: the what-ifs and ncu", ["row", "model", "measured", "error"],
            [[r, f"{m:.4f}", f"{x:.4f}", pct(m, x)] for r, m, x in rows])


def constants():
    rows = [
        ["LAM, a round's latency beyond its pipe cycles", f"{LAM:.0f} cycles", "fit: BV 64 alone, what-if 18"],
        ["C0, an element-wise instruction, alone on a scheduler", f"{C0:.2f} cycles", "the same fit"],
        ["KAPPA, a producer instruction (BV 128)", f"{KAPPA:.2f} cycles", "fit: fused and core chunks"],
        ["KAPPA64, the same at BV 64", f"{KAPPA64:.2f} cycles", "fit: the BV 64 chunk"],
        ["the gate warp on group 0's chain", f"{GATE:.0f} cycles", "what-if 6 - what-if 18"],
        ["T0, a wave's fixed cost, core / full", f"{T0['core']:.1f} / {T0['full']:.1f} us", "q35 4k/1k pairs"],
        ["T0 of a BV 64 row", f"{T_FIRST64:.1f} us", "short_tail_state / tp2_16kx2"],
        ["BV 64 chain alone", f"{BV64_ALONE:.0f} cycles", "v32 what-if 8 less the preparation"],
        ["fused chain alone, no gate work", f"{T18:.0f} cycles", "what-if 18"],
    ]
    return ("Fitted and derived constants", ["constant", "value", "from"], rows)


def decomposition():
    terms = [("rounds' latency, 3 LAM", lambda fw: len(TWO) * LAM),
             ("tensor pipe, both groups' products", lambda fw: 2 * sum(TWO)),
             ("element-wise, E C0 2", lambda fw: (E_CORE if fw == "core" else E_FUSED) * C0 * 2),
             ("the gate warp", lambda fw: 0.0 if fw == "core" else GATE),
             ("the producers' share, KAPPA I_prod", lambda fw: KAPPA * i_prod(fw)),
             ("total (model)", today), ("measured (q35 pair)", lambda fw: BASE[fw])]
    return ("Today's chunk, term by term (SM cycles)", ["term", "core", "full"],
            [[n, f"{f('core'):.0f}", f"{f('full'):.0f}"] for n, f in terms])


def allowed(case, fw, persistent):
    """The largest chunk (cycles) whose row meets the line, or None."""
    line, lo, hi = LINES[case][fw == "full"] * 1e3, 500.0, 12000.0
    if row_us(case, fw, lo, persistent) > line:
        return None
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if row_us(case, fw, mid, persistent) <= line else (lo, mid)
    return lo


def needs():
    f = lambda x: "none (DRAM)" if x is None else f"{x:.0f}"  # noqa: E731
    return ("The chunk each line allows (SM cycles)",
            ["row", "line ms", "chunk allowed", "with persistent CTAs", "today (model)"],
            [[f"{fw} {c}", f"{LINES[c][fw == 'full']:.3f}", f(allowed(c, fw, False)), f(allowed(c, fw, True)),
              f"{today(fw):.0f}"] for c in BV128 for fw in FORWARDS])


def candidates():
    cols = [(c, fw) for c in BV128 + ["varlen_mix"] for fw in FORWARDS if LINES[c][fw == "full"]]
    rows = [["the lines", "-"] + [f"{LINES[c][fw == 'full']:.3f}" for c, fw in cols] + ["-", "-"]]
    for d in DESIGNS:
        t = [(d.row_ms(c, fw), LINES[c][fw == "full"]) for c, fw in cols]
        met = sum(x <= line for x, line in t)
        rows.append([d.name, f"{us(d.chunk('core')):.2f} / {us(d.chunk('full')):.2f}"] +
                    [f"{x:.3f}{'*' if x <= line else ''}" for x, line in t] + [f"{met} of {len(t)}", d.fits])
    return ("Candidates (ms; * meets its line)",
            ["design", "chunk us core / full"] + [f"{fw} {c}" for c, fw in cols] + ["lines met", "fits an SM"], rows)


STAGE = 4 * 8192 + 2 * 8192 + 8192 + 8192 + 2048  # BV 128: K and Q, V, A2, P, gate vectors (hopper_cfg.cuh)


def budgets():
    regs, smem = 2 * 192 * 128 + 2 * 64 * 128, 3 * STAGE + 2 * 8192 + 8192
    stage128 = 4 * 16384 + 2 * 16384 + 2 * 16384 + 2 * 16384 + 4096
    rows = [
        ["today, fused BV 128", regs, smem, "2 x 192 + 2 x 64 registers; 3 stages, o staging, barriers, scratch"],
        ["(a) ping-pong", regs, smem, "the same; two named barriers more"],
        ["(a) two heads a CTA", 4 * 176 * 128 + 2 * 64 * 128, smem + 3 * (4 * 8192 + 2048),
         "four consumer groups at today's 177 live registers"],
        ["(b) chunks of 128", 2 * 224 * 128 + 2 * 64 * 128, 2 * stage128 + 4 * 8192,
         "U and O' of 128 tokens beside S; two 164 KB stages"],
        ["(c) state in shared memory", 2 * 136 * 128 + 2 * 64 * 128, 2 * STAGE + 2 * 8192 + 98304 + 8192,
         "two stages, the fp32 state and its fp16 copy"],
        ["(c) cluster pair, a CTA", 2 * 160 * 128 + 2 * 64 * 128, 2 * STAGE + 2 * 8192 + 8192 + 2 * 16384,
         "half the state a group; two stages and the peer's partial sums"],
        ["(d) persistent", regs, smem, "today's; h0 prefetched to L2"],
    ]
    return ("Budgets (one CTA an SM)", ["design", "registers", "shared KB", "fits", "what sets it"],
            [[n, r, f"{s / 1024:.0f}", "yes" if r <= REGS and s <= SMEM_MAX else "no", w] for n, r, s, w in rows])


def dram():
    rows = []
    for case in BV128 + ["varlen_mix"]:
        for fw in FORWARDS:
            line = LINES[case][fw == "full"]
            if line:
                b = bytes_of(case, fw == "core")
                rows.append([f"{fw} {case}", f"{b / 1e9:.3f}", f"{b / BW * 1e3:.3f}", f"{line:.3f}",
                             f"{100 * b / BW * 1e3 / line:.0f}%"])
    return ("DRAM: the bytes a row moves, at 4.3 TB/s", ["row", "GB", "ms", "line ms", "share of the line"], rows)


def experiments():
    rows = []
    for case in ("q35_4kx8", "q35_1kx8"):
        rows.append(["lab: consumers alone, ping-pong", f"full {case}", row_us(case, "full", alone_today("full")) / 1e3,
                     row_us(case, "full", pingpong_alone("full")) / 1e3, row_us(case, "full", pingpong_alone("full", 2)) / 1e3])
    for case in BV128:
        for fw in FORWARDS:
            rows.append(["lab: ping-pong consumers", f"{fw} {case}", MEASURED[case][fw == "full"],
                         row_us(case, fw, pingpong(fw)) / 1e3, row_us(case, fw, pingpong(fw, 2)) / 1e3])
    for case in ("q35_1kx8", "q35_4kx8", "q397_4kx8"):
        for fw in FORWARDS:
            t = row_us(case, fw, today(fw), persistent=True) / 1e3
            rows.append(["persistent CTAs", f"{fw} {case}", MEASURED[case][fw == "full"], t, t])
    return ("The first device call: predictions (ms)", ["experiment", "row", "today", "simulated", "k = 2"],
            [[e, r, f"{a:.4f}", f"{b:.3f}", f"{c:.3f}"] for e, r, a, b, c in rows])


TABLES = {"constants": constants, "calibration": calibration, "whatifs": whatifs, "decomposition": decomposition,
          "needs": needs, "candidates": candidates, "budgets": budgets, "dram": dram, "experiments": experiments}


def render(table):
    title, header, rows = table
    out = [title, "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def cli(description, tables, check_rows, limit):
    """A model script's command line (this one's and manyheads_corrected.py's):
    prints its tables, or --table NAME's; --check exits 1 if a row of
    check_rows() (its name first, its error last) is off by more than
    limit percent."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--check", action="store_true", help=f"exit 1 if a checked row is off by more than {limit:g}%%")
    ap.add_argument("--table", choices=sorted(tables), help="print only this table")
    a = ap.parse_args()
    for name, f in tables.items():
        if a.table in (None, name):
            print(render(f()))
    bad = [r[0] for r in check_rows() if abs(float(r[-1].rstrip("%"))) > limit]
    if a.check and bad:
        print(f"off by more than {limit:g}%: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0


def main():
    return cli("The many-head kernels' cost model (docs/perf/many-heads-model.md).", TABLES,
               lambda: calibration()[2], 10.0)


if __name__ == "__main__":
    sys.exit(main())
