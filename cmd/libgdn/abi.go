package main

import (
	"unsafe"

	"github.com/gdnjit/gdn"
)

// The Go mirrors of gdn.h's structs: the exported functions read the
// caller's structs through them (cast from the C pointer), so conversion is
// plain Go. Field for field, in order, they must have the C structs' sizes
// and offsets: TestABIMirrorsHeader compares them with what cgo reads from
// gdn.h. The `c` tag is the C field's name.

// abiVersion is GDN_ABI_VERSION.
const abiVersion = 1

// maxDims is GDN_MAX_DIMS.
const maxDims = 5

// Status codes (gdn_status).
const (
	statusOK              int32 = 0
	statusInvalidArgument int32 = 1
	statusClosed          int32 = 2
	statusNoCUDA          int32 = 3
	statusUnsupportedGPU  int32 = 4
	statusOther           int32 = 5
)

// The dtypes (gdn_dtype) and layouts (gdn_layout) of gdn.h are the Go API's
// values, so they convert by a cast.
const (
	dtypeBF16  = int64(gdn.BF16)
	dtypeFP16  = int64(gdn.FP16)
	dtypeFP32  = int64(gdn.FP32)
	dtypeInt32 = int64(gdn.Int32)
	dtypeInt64 = int64(gdn.Int64)
	layoutKV   = int64(gdn.StateKV)
	layoutVK   = int64(gdn.StateVK)
)

// cTensor mirrors gdn_tensor.
type cTensor struct {
	Ptr   uint64         `c:"ptr"`
	Bytes int64          `c:"bytes"`
	Dtype int32          `c:"dtype"`
	Ndim  int32          `c:"ndim"`
	Shape [maxDims]int64 `c:"shape"`
}

// cOptions mirrors gdn_options.
type cOptions struct {
	Device   int32          `c:"device"`
	SMs      int32          `c:"sms"`
	NoGraphs int32          `c:"no_graphs"`
	Reserved int32          `c:"reserved"`
	CacheDir unsafe.Pointer `c:"cache_dir"` // const char *
}

// cPool mirrors gdn_pool.
type cPool struct {
	States      cTensor `c:"states"`
	Slots       *int32  `c:"slots"`
	NSlots      int64   `c:"n_slots"`
	SlotsDevice cTensor `c:"slots_device"`
}

// cSeqs mirrors gdn_seqs.
type cSeqs struct {
	Host   *int64  `c:"host"`
	N      int64   `c:"n"`
	Device cTensor `c:"device"`
}

// cCoreArgs mirrors gdn_core_args.
type cCoreArgs struct {
	Q               cTensor `c:"q"`
	K               cTensor `c:"k"`
	V               cTensor `c:"v"`
	G               cTensor `c:"g"`
	Beta            cTensor `c:"beta"`
	A               cTensor `c:"a"`
	H0              cTensor `c:"h0"`
	O               cTensor `c:"o"`
	Ht              cTensor `c:"ht"`
	CuSeqlens       cSeqs   `c:"cu_seqlens"`
	Pool            cPool   `c:"pool"`
	Checkpoints     cTensor `c:"checkpoints"`
	CheckpointEvery int64   `c:"checkpoint_every"`
	Scale           float32 `c:"scale"`
	Layout          int32   `c:"layout"`
}

// cFullArgs mirrors gdn_full_args.
type cFullArgs struct {
	Q               cTensor `c:"q"`
	K               cTensor `c:"k"`
	V               cTensor `c:"v"`
	G               cTensor `c:"g"`
	Beta            cTensor `c:"beta"`
	ALog            cTensor `c:"a_log"`
	DtBias          cTensor `c:"dt_bias"`
	H0              cTensor `c:"h0"`
	O               cTensor `c:"o"`
	Ht              cTensor `c:"ht"`
	CuSeqlens       cSeqs   `c:"cu_seqlens"`
	Pool            cPool   `c:"pool"`
	Checkpoints     cTensor `c:"checkpoints"`
	CheckpointEvery int64   `c:"checkpoint_every"`
	Scale           float32 `c:"scale"`
	Layout          int32   `c:"layout"`
	L2Norm          int32   `c:"l2norm"`
	GateInKernel    int32   `c:"gate_in_kernel"`
	BetaLogits      int32   `c:"beta_logits"`
	NegEigval       int32   `c:"neg_eigval"`
}

// cDecodeArgs mirrors gdn_decode_args.
type cDecodeArgs struct {
	Q            cTensor `c:"q"`
	K            cTensor `c:"k"`
	V            cTensor `c:"v"`
	G            cTensor `c:"g"`
	Beta         cTensor `c:"beta"`
	ALog         cTensor `c:"a_log"`
	DtBias       cTensor `c:"dt_bias"`
	Pool         cPool   `c:"pool"`
	O            cTensor `c:"o"`
	TokenStates  cTensor `c:"token_states"`
	CuSeqlens    cSeqs   `c:"cu_seqlens"`
	Scale        float32 `c:"scale"`
	Layout       int32   `c:"layout"`
	L2Norm       int32   `c:"l2norm"`
	GateInKernel int32   `c:"gate_in_kernel"`
	BetaLogits   int32   `c:"beta_logits"`
	NegEigval    int32   `c:"neg_eigval"`
}
