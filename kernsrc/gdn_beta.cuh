// gdn_beta.cuh: beta as the kernels use it, from the value they read
// (docs/SPEC.md, "Beta as logits"): as given, or from its logits b
// (beta_logits) sigmoid(b), or 2 sigmoid(b) with neg_eigval, in fp32. The
// preparation kernel (gdn_prep.cu) and the fused core kernel's aux group
// (hopper_aux_fused.cuh) both call it: both paths of the full forward
// compute beta with the same arithmetic.
#pragma once
#include "gdn_common.cuh"

// beta from x as read (fp32, or widened from q's dtype). logits and
// neg_eigval are the call's flags, the same for every thread (a uniform
// branch): without logits x passes through untouched. sigmoid is
// 1 / (1 + e^-b) with the fast exponential and division (a few ulps):
// b -> -inf gives 0 (e^-b overflows to inf), b -> +inf gives 1, NaN stays
// NaN; 2 sigmoid(b) is exact from sigmoid(b).
GDN_DEVICE float beta_of(float x, bool logits, bool neg_eigval) {
  if (!logits) return x;
  const float s = __fdividef(1.f, 1.f + __expf(-x));
  return neg_eigval ? s + s : s;
}
