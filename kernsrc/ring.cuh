// ring.cuh: a pipeline ring of shared-memory stages. Chunk c of a walk
// lives in stage c % kStages; each stage has one mbarrier per signal
// (full: its copies landed; ready: its producers are done; empty: its
// consumers are done; and any hand-offs between producers), and a signal's
// phase for chunk c is its (c / kStages)-th, so a wait is on parity
// (c / kStages) & 1.
//
// A parity wait is unambiguous only while the barrier's previous phase is
// complete: a waiter may pass on a phase two behind the one it means.
// Each role's order of waits must rule that out (the kernels' comments say
// how; kernsrc's pipeline model tests check the Hopper kernel's under
// random schedules).
#pragma once
#include "sm90_sync.cuh"

// Where chunk c sits in the ring: its stage s and the use of that stage
// (c / kStages), whose parity its waits take.
struct Slot {
  int s, use;
};

// Ring<kStages, kStageBytes, kSignals>: the barriers of kStages stages of
// kStageBytes each, signal-major (at[signal][stage]). A Ring lives in
// shared memory (the CTA's; a kernel places it and its stages), and its
// methods wait and arrive on its barriers; stage s's bytes are the
// kernel's, at its stages' base + s kStageBytes.
template <int kStages_, int kStageBytes_, int kSignals>
struct Ring {
  static constexpr int kStages = kStages_;
  static constexpr int kStageBytes = kStageBytes_;
  uint64_t at[kSignals][kStages];

  GDN_DEVICE static Slot slot(int c) { return Slot{c % kStages, c / kStages}; }
  GDN_DEVICE uint64_t* bar(int signal, int s) { return &at[signal][s]; }

  // Waits for the signal of chunk x's use of its stage.
  GDN_DEVICE void wait(int signal, const Slot& x) { mbar_wait(bar(signal, x.s), x.use & 1); }
  // Waits for the signal of the stage's use before chunk x's (chunk c - kStages).
  GDN_DEVICE void wait_before(int signal, const Slot& x) { mbar_wait(bar(signal, x.s), (x.use - 1) & 1); }
  GDN_DEVICE void arrive(int signal, const Slot& x) { mbar_arrive(bar(signal, x.s)); }
};
