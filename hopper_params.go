package gdn

import (
	"fmt"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/kernsrc"
)

// hopperParams fills the Hopper kernel's parameter block for validated
// arguments: the five tensor maps (TMA descriptors of q, k, v, A and o, each
// viewed as a 4-D tensor (innermost dim, heads, T, B) with 64-token boxes of
// 128 bytes per row, 128-byte swizzled), the pointers and the sizes. With
// cu_seqlens, B is 1 and T counts every token; the kernel addresses a
// sequence by its first token.
func hopperParams(ctx *driver.Context, a *CoreArgs, p Problem, out *[kernsrc.HopperParamsBytes]byte) error {
	var hp kernsrc.HopperParams
	in := driver.TensorBF16
	if p.Dtype == FP16 {
		in = driver.TensorF16
	}
	tokens := func(dt driver.TensorDtype, base uintptr, inner, heads int, box0 uint32) ([128]byte, error) {
		es := uint64(dt.Size())
		row := uint64(inner) * es
		m, err := ctx.EncodeTiled(dt, driver.DevicePtr(base),
			[]uint64{uint64(inner), uint64(heads), uint64(p.T), uint64(p.B)},
			[]uint64{row, row * uint64(heads), row * uint64(heads) * uint64(p.T)},
			[]uint32{box0, 1, ChunkLen, 1}, driver.Swizzle128B)
		return m, err
	}
	var err error
	if hp.MapQ, err = tokens(in, a.Q.Ptr, HeadDim, p.Hq, 64); err != nil {
		return fmt.Errorf("gdn: tensor map of q: %w", err)
	}
	if hp.MapK, err = tokens(in, a.K.Ptr, HeadDim, p.Hq, 64); err != nil {
		return fmt.Errorf("gdn: tensor map of k: %w", err)
	}
	if hp.MapV, err = tokens(in, a.V.Ptr, HeadDim, p.Hv, 64); err != nil {
		return fmt.Errorf("gdn: tensor map of v: %w", err)
	}
	if hp.MapO, err = tokens(in, a.O.Ptr, HeadDim, p.Hv, 64); err != nil {
		return fmt.Errorf("gdn: tensor map of o: %w", err)
	}
	if p.ADtype == FP32 {
		hp.MapA, err = tokens(driver.TensorF32, a.A.Ptr, ChunkLen, p.Hv, 32)
	} else {
		hp.MapA, err = tokens(driver.TensorBF16, a.A.Ptr, ChunkLen, p.Hv, 64)
	}
	if err != nil {
		return fmt.Errorf("gdn: tensor map of A: %w", err)
	}
	hp.G, hp.Beta, hp.O = a.G.Ptr, a.Beta.Ptr, a.O.Ptr
	if p.HasH0 {
		hp.H0 = a.H0.Ptr
	}
	if p.HasHt {
		hp.Ht = a.Ht.Ptr
	}
	if p.Seqs != nil {
		hp.CuSeqlens = a.CuSeqlensDevice.Ptr
	}
	hp.Scale = p.Scale
	hp.T, hp.Hq, hp.Hv, hp.N = int32(p.T), int32(p.Hq), int32(p.Hv), int32(p.N)
	if p.BetaDtype == FP32 {
		hp.Flags |= kernsrc.HopperFlagBetaFP32
	}
	if p.ADtype == FP32 {
		hp.Flags |= kernsrc.HopperFlagAFP32
	}
	if p.SeqlensDtype == Int64 {
		hp.Flags |= kernsrc.HopperFlagSeqlensInt64
	}
	hp.Pack(out)
	return nil
}
