#!/usr/bin/env python3
"""manyheads_corrected.py: the many-head cost model refitted to what v44
measured (docs/perf/many-heads-model.md, "The model, corrected").

    python3 scripts/manyheads_corrected.py [--check] [--table NAME]

The first model (manyheads_model.py) read today's two consumer groups as
a lockstep: each round waits for both groups' products. It predicted that
taking turns at the tensor pipe would make the consumers' chain 1.2-1.36x
faster. v44 measured 0.99x. Here the groups take turns as they come: the
chunk is the first model's ping-pong simulation with no hand-over cost.
Its two constants are refitted on the same two measurements: the BV 64
chain alone and the fused chain alone without gate work (what-if 18).
KAPPA is refitted on today's chunks. Every other what-if is out of sample.
Prints the constants, the fit and the what-ifs, the premise as each model
predicts it, the levers, and what each line needs. --check exits 1 if a
row of the fit or the what-ifs is off by more than 12%. Standard library
only.
"""

import math
import random
import sys

import manyheads_model as m
from manyheads_data import *  # noqa: F401,F403 (the constants the page names)


def _lam(c0):
    """LAM from C0, by the BV 64 chain alone (one group, four rounds)."""
    return (m.BV64_ALONE - sum(m.ONE) - E_BV64 * c0) / len(m.ONE)


def _fit():
    """C0 such that the fused chain alone, no gate work, takes what-if
    18's time, LAM following from it; bisection (the chain grows with C0
    over the range where LAM stays positive)."""
    lo, hi = 0.5, (m.BV64_ALONE - sum(m.ONE)) / E_BV64
    for _ in range(60):
        c0 = (lo + hi) / 2
        t = m.simulate_pingpong(m.TWO, GAPS_FUSED, 0.0, lam=_lam(c0), c0=c0, turn=0.0)
        lo, hi = (c0, hi) if t < m.T18 else (lo, c0)
    return _lam(lo), lo


LAM2, C02 = _fit()
NO_VN = [m.TWO[0], m.TWO[2]]
GAPS_NO_O = [106, 103, 145, 8]  # E_NO_O by segment (what-if 19)
GAPS_NO_VN = [GAPS_FUSED[0], GAPS_FUSED[1] + GAPS_FUSED[2] - E_PACK_VN, GAPS_FUSED[3]]  # what-if 34


def alone(rounds, gaps, gate=0.0, turn=0.0, scale=1.0):
    """The consumers' chunk without producers (cycles): the two groups
    taking turns as they come (turn 0) or by barriers (turn > 0); scale
    multiplies every gap's element-wise work."""
    return m.simulate_pingpong(rounds, [g * scale for g in gaps], gate, lam=LAM2, c0=C02, turn=turn)


def alone_today(fw, turn=0.0, scale=1.0, gate=True, decay=True, gate_share=1.0, o_scale=True):
    """Today's consumers alone; gate False leaves the fused chain's gate
    work out, gate_share keeps that share of it on group 0's chain, decay
    False leaves out the state's decay (its FMULs, in the third gap),
    o_scale False o's scale (its FMULs as O is staged, in the last)."""
    gaps = list(GAPS_CORE if fw == "core" else GAPS_FUSED)
    if not decay:
        gaps[2] -= DECAY_FMUL
    if not o_scale:
        gaps[3] -= O_SCALE_FMUL
    return alone(m.TWO, gaps, gate_share * m.GATE if fw == "full" and gate else 0.0, turn, scale)


KAPPA2 = m.kappa_fit([(m.BASE[fw], alone_today(fw), m.i_prod(fw)) for fw in m.FORWARDS])


def chunk(fw, turn=0.0, scale=1.0, gate=True, prod=1.0, decay=True, gate_to_converter=False, gate_share=1.0,
          o_scale=True):
    """A chunk with today's producers beside the consumers (cycles), never
    shorter than the producers' own chain. gate_to_converter: the fused
    gate work leaves the chain for the converter, whose four warps (one a
    scheduler) share its instructions."""
    floor = FLOOR_CORE if fw == "core" else FLOOR_FUSED
    extra = GATE_INSTR / 4 if gate_to_converter and fw == "full" else 0.0
    a = alone_today(fw, turn, scale, gate and not gate_to_converter, decay, gate_share, o_scale)
    return max(a + prod * KAPPA2 * (m.i_prod(fw) + extra), prod * floor)


def _p(a, b):
    return m.cyc(m.pair(a, b)[0])


def constants():
    rows = [["C0, an element-wise instruction, a warp alone on its scheduler", f"{m.C0:.2f}", f"{C02:.2f}"],
            ["LAM, a round's latency beyond its pipe cycles", f"{m.LAM:.0f}", f"{LAM2:.0f}"],
            ["KAPPA, a producer instruction", f"{m.KAPPA:.2f}", f"{KAPPA2:.2f}"]]
    return ("Constants: the first model and the corrected one (cycles)", ["constant", "first model", "corrected"], rows)


def fit():
    """Consumers alone, then with some producers idle (cycles a chunk)."""
    fw = "full"
    a6 = alone_today(fw)
    rows = [
        ["BV 64 chain alone (fit)", m.alone(m.ONE, E_BV64, 1), len(m.ONE) * LAM2 + sum(m.ONE) + E_BV64 * C02,
         m.BV64_ALONE],
        ["18: consumers alone, no gate work (fit)", m.alone(m.TWO, E_FUSED, 2), alone_today(fw, gate=False), m.T18],
        ["6: consumers alone", m.alone_today(fw), a6, m.T6],
        ["19: consumers alone, no gate work, no O", m.alone(m.TWO_NO_O, E_NO_O, 2), alone(m.TWO_NO_O, GAPS_NO_O),
         _p(0.2072, 0.0642)],
        ["34: consumers alone, no Vn product", m.alone(NO_VN, E_FUSED - E_PACK_VN, 2, gate=m.GATE),
         alone(NO_VN, GAPS_NO_VN, m.GATE), _p(0.32605, 0.09405)],
        ["core 9: consumers alone", m.alone_today("core"), alone_today("core"), _p(0.2745, 0.0859)],
        ["core 8: aux group idle", m.alone_today("core") + m.KAPPA * I_CONV_CORE,
         alone_today("core") + KAPPA2 * I_CONV_CORE, _p(0.2858, 0.0881)],
        ["5: aux group idle", m.alone_today(fw) + m.KAPPA * I_CONV_FUSED, a6 + KAPPA2 * I_CONV_FUSED,
         _p(0.3522, 0.1030)],
        ["36: half the preparation's products",
         m.alone_today(fw) + m.KAPPA * (I_CONV_FUSED - I_P_FUSED / 2 + I_AUX_FUSED / 2),
         a6 + KAPPA2 * (I_CONV_FUSED - I_P_FUSED / 2 + I_AUX_FUSED / 2), _p(0.37835, 0.1091)],
        ["today, core", m.today("core"), chunk("core"), m.BASE["core"]],
        ["today, full", m.today("full"), chunk("full"), m.BASE["full"]],
    ]
    return ("The fit and the what-ifs: the first model and the corrected one (cycles a chunk, H200)",
            ["row", "first model", "corrected", "measured", "corrected's error"],
            [[r, f"{a:.0f}", f"{b:.0f}", f"{x:.0f}", m.pct(b, x)] for r, a, b, x in rows])


def premise():
    """The turns' speed-up on q35_4kx8 as each model predicts it (rows
    with their waves' fixed costs, as the page's predictions), beside
    v44's on both q35 rows."""
    r = lambda fw, c: m.row_us("q35_4kx8", fw, c)  # noqa: E731
    rows = [["consumers alone, full", r("full", m.alone_today("full")) / r("full", m.pingpong_alone("full")),
             r("full", alone_today("full")) / r("full", alone_today("full", m.TURN)), "0.99"],
            ["turns over today's producers, core", r("core", m.today("core")) / r("core", m.pingpong("core")),
             r("core", chunk("core")) / r("core", chunk("core", m.TURN)), "1.01"]]
    return ("The premise on q35_4kx8: the turns' speed-up as predicted and as measured (v44, H100)",
            ["experiment", "first model", "corrected", "measured"],
            [[e, f"{a:.2f}", f"{b:.2f}", x] for e, a, b, x in rows])


LEVERS = [
    ("today", {}),
    ("the state's decay folded into the factors (64 FMUL a warp fewer)", {"decay": False}),
    ("o's scale folded into the factors (32 FMUL a warp fewer, as O is staged)", {"o_scale": False}),
    ("the gate work moved to the converter", {"gate_to_converter": True}),
    ("the gate work over two warps, half of it on group 0's chain", {"gate_share": 0.5}),
    ("both", {"decay": False, "gate_to_converter": True}),
    ("both, and a further 10% of the element-wise work", {"decay": False, "gate_to_converter": True, "scale": 0.9}),
    ("the consumers' element-wise work -25%", {"scale": 0.75}),
    ("element-wise -25%, no gate work, producers halved", {"scale": 0.75, "gate": False, "prod": 0.5}),
]


def levers():
    rows = []
    for name, kw in LEVERS:
        ck = {fw: chunk(fw, **kw) for fw in m.FORWARDS}
        rows.append([name, f"{ck['core']:.0f}", f"{ck['full']:.0f}"] +
                    [f"{m.row_us('q35_4kx8', fw, ck[fw]) / 1e3:.3f}" for fw in m.FORWARDS] +
                    [f"{m.row_us('q35_4kx8', fw, ck[fw], persistent=True) / 1e3:.3f}" for fw in m.FORWARDS])
    return ("The levers, corrected model (chunk cycles; q35_4kx8 ms, today's waves and persistent CTAs)",
            ["lever", "core chunk", "full chunk", "core q35_4kx8", "full q35_4kx8", "core, persistent",
             "full, persistent"], rows)


def _cut(fw, target):
    """The share of the consumers' element-wise work that must go for the
    chunk to reach target cycles, or None if removing it all is not
    enough (the producers' floor)."""
    if chunk(fw, scale=0.0) > target:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if chunk(fw, scale=1.0 - mid) > target else (lo, mid)
    return hi


def needs():
    f = lambda x: "-" if x is None else f"{100 * x:.0f}%"  # noqa: E731
    rows = []
    for case in m.BV128:
        for fw in m.FORWARDS:
            a, ap = m.allowed(case, fw, False), m.allowed(case, fw, True)
            rows.append([f"{fw} {case}", f"{chunk(fw):.0f}", "-" if a is None else f"{a:.0f}",
                         f(None if a is None else _cut(fw, a)), f(None if ap is None else _cut(fw, ap))])
    return ("What each line needs of the consumers' element-wise work (corrected model)",
            ["row", "today's chunk", "chunk allowed", "element-wise to remove", "with persistent CTAs"], rows)


FLOORS = (4, 6, 8, 10, 16)  # the floor of G' (lazy_decay's), as 2^-k


def _fold_share(k, heads=64, chunks=64, seed=1):
    """The share of chunks at which lazy_decay's writer folds the decay,
    over walks of the suite's recipe's gates on a head whose gates are not
    zero (ref/recipe.go: g = logsigmoid(N(0,1)) / 16 a token, 64 tokens a
    chunk); the walk's last chunk always folds."""
    r, floor, folds = random.Random(seed), -k * math.log(2.0), 0
    for _ in range(heads):
        lg = 0.0
        for c in range(chunks):
            lg += sum(-math.log1p(math.exp(-r.gauss(0.0, 1.0))) / 16 for _ in range(64))
            if lg < floor or c == chunks - 1:
                folds, lg = folds + 1, 0.0
    return folds / (heads * chunks)


def folds():
    return ("lazy_decay on the suite's gates: the chunks that fold",
            ["floor of G'"] + [f"2^-{k}" for k in FLOORS],
            [["chunks that fold"] + [f"{100 * _fold_share(k):.0f}%" for k in FLOORS]])


TABLES = {"constants": constants, "fit": fit, "premise": premise, "levers": levers, "needs": needs,
          "folds": folds}


def main():
    return m.cli("The many-head cost model refitted to v44 (docs/perf/many-heads-model.md).", TABLES,
                 lambda: fit()[2], 12.0)


if __name__ == "__main__":
    sys.exit(main())
