"""manyheads_data.py: the numbers the cost model of manyheads_model.py stands
on: the primitives (measured, counted from the SASS, or assumed, each
marked) and the measured times it is calibrated against. The design page,
docs/perf/many-heads-model.md, cites the source of each."""

# --- Primitives -------------------------------------------------------------------

CLOCK = 1.98e9  # SM cycles a second in 30-replay runs (v15; v36: 1950-1980 MHz)
SMS = 132
BW = 4.3e12  # device copy bandwidth, bytes a second (docs/BENCH.md)
SOFT_P = 8  # the soft maximum of SM time and DRAM time (assumed)
PIPE = {64: 32, 128: 64}  # tensor-pipe cycles of one m64nNk16 (v15; ncu in v33 agrees)
SMEM_MAX, REGS = 227 * 1024, 65536  # a CTA's shared memory, an SM's registers
# One consumer warp's element-wise instructions on a full chunk's path,
# segment by segment between its wgmma waits (HGMMA and a round's shadow
# left out): cuobjdump -sass of the cubins `gdn warmup --arch sm_90a --all`
# writes (NVRTC 12.4). Fused: top and S -> A; V - e^g U and O' scaled;
# Vn's operands and gamma; release and o's staging. Core: the same, o
# stored at once. BV 64 (kWide): o's store runs in the update's shadow.
GAPS_FUSED = [106, 151, 145, 78]
GAPS_CORE = [99, 152, 145, 107]
E_FUSED, E_CORE, E_BV64 = sum(GAPS_FUSED), sum(GAPS_CORE), 76 + 26 + 94 + 5 + 153 + 7
E_NO_O = 106 + 103 + 145 + 8  # E_FUSED without O' scaling and staging (what-if 19)
E_PACK_VN = 16  # Vn's fp16 packs (what-ifs 32 and 34 drop them with Vn's round)
# Producer instructions a scheduler executes a chunk (a producer
# warpgroup has a warp on each scheduler), from the same SASS.
I_CONV_FUSED, I_AUX_FUSED, I_P_FUSED = 550, 850, 250  # converter; aux; P's part of the converter's
I_CONV_CORE, I_AUX_CORE = 269, 567  # converter (K, Q to fp16); aux (P, gates, A2 from fp32 A)
I_BV64, I_BV64_FULL = 833, 484  # two aux groups, a chunk each in turn (core; full: A2 given)
TURN = 30  # cycles a ping-pong hand-over adds to a round (assumed)
T_SWITCH = 1.5  # us, a persistent CTA's switch to its next head (assumed)
# The fused producers' chains a chunk (v35 timeline: aux group 4.61 k
# cycles, converter 3.75 k): the floor of any design that keeps one aux
# group and one converter. The core's aux chain is not measured: its
# instructions at the fused aux group's cycles an instruction (assumed).
FLOOR_FUSED = 4610
FLOOR_CORE = I_AUX_CORE * FLOOR_FUSED / I_AUX_FUSED
PREP_US = 336.5 / (512 * 64)  # preparation kernel, us a chunk and head, 4 heads a block (v31)
PREP_ONE_HEAD = 1.25  # one head a block against four (v16)

# --- Measured times -----------------------------------------------------------------

CASES = {  # (Hq, Hv, sequence lengths): ref/suite.go
    "q35_4kx8": (16, 32, [4096] * 8),
    "q35_1kx8": (16, 32, [1024] * 8),
    "q397_4kx8": (16, 64, [4096] * 8),
    "sym32_8kx4": (32, 32, [8192] * 4),
    "varlen_mix": (16, 32, [7000, 33, 1, 4096, 511, 2048, 64, 129]),
    "tp2_16kx2": (8, 32, [16384] * 2),
    "q397_32k": (16, 64, [32768]),
    "short_tail_state": (16, 32, [300]),
}
MEASURED = {  # docs/perf/v39.md, the new build, ms: (core, full)
    "q35_4kx8": (0.3453, 0.4129), "q35_1kx8": (0.1052, 0.1188),
    "q397_4kx8": (0.6969, 0.8227), "sym32_8kx4": (0.3513, 0.4105),
    "varlen_mix": (0.2319, 0.2733), "tp2_16kx2": (0.5104, 0.5824),
    "q397_32k": (1.0563, 1.1348), "short_tail_state": (0.0144, 0.0189),
}
LINES = {  # the design goal, ms: (core, full)
    "q35_4kx8": (0.302, 0.345), "q35_1kx8": (0.083, 0.095), "q397_4kx8": (0.589, 0.673),
    "sym32_8kx4": (0.309, 0.354), "varlen_mix": (0.200, None),
}
BV128 = ["q35_4kx8", "q35_1kx8", "q397_4kx8", "sym32_8kx4"]
FORWARDS = ("core", "full")

# --- v44's profile (ncu, H100, ce9c7e0, NVRTC 13), for the corrected model -----------

# The fused kernel's gate warp: instructions of its own path a chunk
# (executed counts), beyond the 587 every consumer warp issues.
GATE_INSTR = 326
# The state's decay a chunk, S *= gamma: one FMUL a state register, 64 a
# consumer warp (hopper_consumer.cuh).
DECAY_FMUL = 64
# o's scale as O is staged, sc * O: one FMUL an O register, 32 a consumer
# warp, after the chunk's last products (the last gap): the lever v45
# builds, folding it into the factors e^g and P's gates.
O_SCALE_FMUL = 32
