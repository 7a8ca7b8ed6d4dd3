// hopper_cfg.cuh: HopperCfg, the one configuration type of the Hopper core
// forward. Go (kernsrc/hopper.go) names each variant's Cfg in the kernel's
// name expression, gdn_hopper_fwd<HopperCfg<...>>; everything else about
// the variant (warpgroups, register budgets, the shared-memory layout,
// named barriers) follows from its six choices here, and the numbers Go
// launches with (GDN_THREADS, GDN_SMEM_BYTES) are checked against them.
#pragma once
#include "gdn_solve.cuh"
#include "ring.cuh"

// Storage type of 16-bit tiles: v and o (V), q and k (QK).
enum class Elt : int { bf16 = 0, fp16 = 1 };
// The pass: the core forward, or the transfer pass of a sequence-parallel
// plan (no q, P or o: U = K S, Vn and the state update only).
enum class Pass : int { forward = 0, transfer = 1 };
// How much of the full forward's preparation the kernel does itself:
// none (g cumulative, A or A2 given), norm (the L2 norm of q and k; A2
// given), fused (the norm and all of the preparation: gates, A2),
// fused_nonorm (the preparation without the norm).
enum class Prep : int { none = 0, norm = 1, fused = 2, fused_nonorm = 3 };

// The ring's signals (ring.cuh): per stage full (TMA bytes; under kFused
// also the gate warp's vectors), ready (the producers are done), empty (the
// consumers are done), qk_read (the aux group has read K and Q as loaded:
// the converter's go) and normed (under kNorm, the converter has
// normalised K and Q: the aux group's go).
enum Signal : int { kFull = 0, kReady, kEmpty, kQKRead, kNormed, kSignals };

// St: the states variant, which also reads and writes the caller's
// states in the serving layer's formats (a pool, [V,K], bf16:
// hopper_state.cuh); without it the kernel has none of that code.
template <Elt V, Elt QK, int NC, Pass P, Prep R, bool St = false>
struct HopperCfg {
  static constexpr bool kStates = St;
  static_assert(!St || P == Pass::forward, "the transfer pass reads and writes only its own states");
  static constexpr bool kVF16 = V == Elt::fp16;    // v and o are fp16 (else bf16)
  static constexpr bool kQKFP16 = QK == Elt::fp16;  // q and k are fp16 (else bf16, converted in place)
  static constexpr bool kConvert = !kVF16;          // bf16 v
  static_assert(kQKFP16 || kConvert, "fp16 v with bf16 q and k is not a variant");
  static constexpr int kNC = NC;  // consumer warpgroups, 64 value columns each
  static_assert(NC == 1 || NC == 2, "one or two consumer warpgroups");
  static constexpr int kBV = 64 * kNC;
  static constexpr bool kXfer = P == Pass::transfer;
  static constexpr bool kNorm = R == Prep::norm || R == Prep::fused;
  static constexpr bool kFused = R == Prep::fused || R == Prep::fused_nonorm;

  // Warpgroups. Aux: each prepares every kAux-th chunk (its element-wise,
  // latency-bound work takes longer than one consumer's chain); with two
  // consumers the register file has room for one. Converter: at BV 128
  // with bf16 q and k, it converts K and Q to fp16 in place once the aux
  // group's Q K^T has read them, so that the conversion leaves the aux
  // group's chain (the bound of a BV 128 chunk) without entering the
  // consumers'; under kNorm it also L2-normalises them, under kFused it
  // builds P too.
  static constexpr int kAux = kNC == 1 ? 2 : 1;
  static constexpr int kConv = kNC == 2 && !kQKFP16 && !kXfer ? 1 : 0;
  static constexpr int kThreads = 128 * (kAux + kNC + kConv);
  static_assert(!kNorm || kConv == 1, "the L2 norm is the converter's");
  static_assert(!kFused || (kConv == 1 && kAux == 1), "the fused preparation needs the converter and one aux group");

  // How a chunk's first products are formed. A CTA with one consumer group
  // is bound by that group's chain, which runs faster as fewer, wider
  // products: [U | O'] as one m64n128 product, and Vn with V converted to
  // fp16 in the stage by the aux group. With two consumer groups (and in
  // the transfer pass) the aux group is the bound, so the consumers take
  // work off it: V enters through registers as loaded, U and O' are m64n64
  // products, and the aux converts only K and Q.
  static constexpr bool kWide = kNC == 1 && !kXfer;
  // The fused kernel stores each chunk's o in the next chunk, once that
  // chunk's first products are issued: off the chain between a chunk's
  // last products and the next one's first. (A kWide chain would never
  // store a chunk but the last.)
  static constexpr bool kDeferStore = kFused;
  static_assert(!kDeferStore || (!kWide && !kXfer), "o's deferred store is the two-group chain's");
  // The transfer matrix's early exit (hopper_consumer.cuh). Off only in a
  // test build that checks the exit leaves what walking to the end gives.
  static constexpr bool kEarlyExit = true;
  // A test build delays the early pass's CTAs (kEarlyPass), to check that
  // the scan waits for that pass; never in production.
  static constexpr bool kDelayEarlyPass = false;

  // Register budgets (setmaxnreg). The consumers hold S^T, [U | O'] and
  // half of S^T's fp16 copy; the aux groups give up what they can, the
  // converter nearly all (the least setmaxnreg allows with its pieces in
  // flight: two at a time, with kNorm two row groups, with kFused P's
  // accumulator). The CTA's pool is what the launch gave it (65536 /
  // threads, rounded down to a multiple of 8, per thread), and an increase
  // waits until the pool can serve it: asking for more than the decreases
  // free hangs.
  static constexpr int kLaunchRegs = (65536 / kThreads) / 8 * 8 > 255 ? 255 : (65536 / kThreads) / 8 * 8;
  static constexpr int kConsumerRegs = kNC == 1 ? 208 : 192;
  static constexpr int kConvRegs = kFused ? 64 : kNorm ? 48 : 24;
  static constexpr int kAuxRegs =
      ((kLaunchRegs * kThreads - kConsumerRegs * 128 * kNC - kConvRegs * 128 * kConv) / (128 * kAux)) / 8 * 8;
  static constexpr bool kSetRegs = kLaunchRegs < kConsumerRegs;
  static_assert(!kSetRegs || kAuxRegs * 128 * kAux + kConsumerRegs * 128 * kNC + kConvRegs * 128 * kConv <=
                                 kLaunchRegs * kThreads,
                "register pool of the CTA");
  static_assert(!kSetRegs || kAuxRegs >= 64, "aux register budget");

  // Named barriers: 1..kNC for each consumer group, kBarConsumers for all
  // consumer groups together (the transfer matrix's early exit), kBarConv
  // for the converter, kBarAux + a for aux group a.
  static constexpr int kBarConv = 3;
  static constexpr int kBarConsumers = 5;
  static constexpr int kBarAux = 7;

  // Shared memory (bytes from a 1024-byte-aligned base). A stage holds a
  // chunk's operands, every tile 1024-byte aligned: K and Q as two half
  // tiles (d blocks) of 128 rows each, K rows j then Q rows i; kNC value
  // tiles [64 j][64 v]; A2 [64 i][64 j] fp16 (A first lands there: fp32 in
  // it and P's tile, or bf16); P [64 i][64 j] fp16; the gate vectors.
  // Three stages at either tile width: A landing where A2 and P go, not in
  // a ring of its own, is what lets three fit at BV 128.
  static constexpr int kStages = 3;
  static constexpr int kTile = 8192;  // 64 rows x 128 bytes
  static constexpr int kOffBQ = 0;
  static constexpr int kOffV = kOffBQ + 4 * kTile;
  static constexpr int kOffA2 = kOffV + kNC * kTile;
  static constexpr int kOffP = kOffA2 + kTile;
  static constexpr int kOffVec = kOffP + kTile;  // the gate vectors (Vec)
  static constexpr int kStageBytes = kOffVec + 2048;
  static constexpr int kOffOut = kStages * kStageBytes;   // kNC staging tiles of o [64 i][64 v]
  static constexpr int kOffBars = kOffOut + kNC * kTile;  // the ring's mbarriers
  static constexpr int kOffStop = kOffBars + 512;         // int: the transfer matrix's early exit
  // kFused: the aux group's scratch for the inverse (gdn_solve.cuh's
  // diagonal blocks, one for all stages: the aux group takes the chunks one
  // at a time), then the gate warp's raw gates (fp32 [2][64], chunk x's at
  // slot x % 2, copied a chunk ahead).
  static constexpr int kOffInv = kOffBars + 1024;
  static constexpr int kInvLd = 0;
  static constexpr int kRawGates = kInvLd + kLdBytes;
  static constexpr int kInvBytes = (kRawGates + 2 * 64 * 4 + 1023) / 1024 * 1024;  // (whole kilobytes)
  static constexpr int kSmemBytes = kOffInv + (kFused ? kInvBytes : 0) + 1024;    // + alignment slack of the base
  static_assert(kSignals * kStages * 8 <= kOffStop - kOffBars, "the stop word follows the mbarriers");

  // Where the ring's barriers live. The fused kernels keep them in static
  // shared memory: their addresses are then link-time constants (32-bit,
  // a constant plus 8 x the stage), and no 64-bit generic pointer to them
  // has to stay live across the consumers' chain, where those kernels'
  // registers peak (NVRTC 13 spilled one such pointer, 8 + 8 bytes a
  // chunk). The others keep them in the dynamic block at kOffBars.
  static constexpr bool kStaticRing = kFused;
  using Ring = ::Ring<kStages, kStageBytes, kSignals>;
  using E = Elem<kVF16>;  // v's and o's storage type
};
