package plan

import (
	"github.com/gdnjit/gdn/internal/problem"
	"github.com/gdnjit/gdn/kernsrc"
)

// Kernels lists the kernel variants a Runtime with default knobs on sms
// SMs runs p (a Problem of the core forward's dtypes: Dtype and Hq, Hv, B,
// T or Seqs) with: the core forward's kernel and, where the plan splits,
// its transfer pass and the scan; with full, also those of the full
// forward on the same shape, with and without L2Norm (its preparation
// kernel, and its core on the normalised copies, or the core that does the
// whole preparation itself). `gdn warmup --shapes` compiles them ahead of
// the first call.
func Kernels(p problem.Problem, sms int, full bool) ([]kernsrc.Variant, error) {
	p = p.WithN()
	p.QKDtype, p.QKNorm = p.Dtype, false
	var out []kernsrc.Variant
	add := func(v kernsrc.Variant) {
		for _, w := range out {
			if w.Name == v.Name {
				return
			}
		}
		out = append(out, v)
	}
	core := func(p problem.Problem) error {
		pl, err := Core(p, sms, Knobs{})
		if err != nil {
			return err
		}
		add(pl.Variant)
		if pl.SegmentChunks > 0 {
			xfer := pl.TileWidth
			if pl.TransferTileWidth > 0 {
				xfer = pl.TransferTileWidth
			}
			v, err := kernsrc.HopperTransferVariant(CoreDtype(p), xfer/64)
			if err != nil {
				return err
			}
			add(v)
			scan, err := kernsrc.ScanVariant(pl.ScanColumns)
			if err != nil {
				return err
			}
			add(scan)
		}
		return nil
	}
	if err := core(p); err != nil || !full {
		return out, err
	}
	// With L2Norm the core that does the whole preparation (FusedPrep) or
	// the core on the normalised copies; without it the core that does the
	// preparation without the norm, or the core forward's plan. The
	// preparation kernel runs wherever the core does not fuse it.
	for _, l2norm := range []bool{true, false} {
		if err := core(fullCoreProblem(p, sms, Knobs{}, l2norm)); err != nil {
			return nil, err
		}
	}
	_, chunks := ChainChunks(p)
	prep, err := kernsrc.PrepVariant(kernsrc.PrepChunkKernel, InputDtype(p.Dtype), PrepHeads(p, chunks, sms, 0))
	if err != nil {
		return nil, err
	}
	add(prep)
	return out, nil
}
