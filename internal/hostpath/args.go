package hostpath

import "github.com/gdnjit/gdn/dtype"

// CoreArgs are gdn.HostCoreArgs (whose documentation gives the layouts and
// rules), field for field, so that package gdn converts one into the
// other.
type CoreArgs struct {
	B, T, Hq, Hv int
	CuSeqlens    []int
	SeqlensDtype dtype.Dtype

	Dtype   dtype.Dtype
	Q, K, V []float32
	G       []float32
	Beta    []float32
	A       []float32
	H0      []float32

	BetaDtype  dtype.Dtype
	ADtype     dtype.Dtype
	Scale      float32
	FinalState bool
}

// FullArgs are gdn.HostFullArgs, field for field.
type FullArgs struct {
	B, T, Hq, Hv int
	CuSeqlens    []int
	SeqlensDtype dtype.Dtype

	Dtype        dtype.Dtype
	Q, K, V      []float32
	G            []float32
	Beta         []float32
	ALog, DtBias []float32
	H0           []float32

	BetaDtype             dtype.Dtype
	Scale                 float32
	FinalState            bool
	L2Norm, GateInKernel  bool
	BetaLogits, NegEigval bool
}

// Result is gdn.HostCoreResult: o, and ht when the call asked for it,
// widened to float32.
type Result struct {
	O  []float32
	Ht []float32
}
