package kernsrc

import (
	"fmt"
	"math"
)

// DecodeKernel is the entry point of gdn_decode.cu: one batched recurrent
// step of 1 to DecodeMaxTokens tokens a sequence, from a state pool in
// place (docs/SPEC.md, "Decode").
const DecodeKernel = "gdn_decode"

// DecodeThreads is the decode kernel's block size. A CTA owns
// DecodeColumns value columns of one value head of one sequence: the grid
// is (128 / DecodeColumns, Hv, N).
const DecodeThreads = 128

// DecodeColumns is the value columns a decode CTA owns: a 128 x 32 slice
// of the state, 16 KB in fp32, 32 values a thread, held in registers for
// the whole call.
const DecodeColumns = 32

// DecodeMaxTokens is the most tokens a sequence brings to one decode call.
const DecodeMaxTokens = 8

// DecodeParamsBytes is the size of GdnDecodeParams, the kernel's one
// parameter (gdn_decode.cu): twelve device addresses (q, k, v, g, beta,
// a_log, dt_bias, pool, slots, o, token_states, cu_seqlens), then six
// 32-bit fields (scale, T, Hq, Hv, N, flags). Every member is naturally
// aligned, so the sizes fix the offsets; the kernel static_asserts both.
const DecodeParamsBytes = 12*8 + 6*4

// DecodeOffScalars is the offset of the 32-bit fields in GdnDecodeParams.
const DecodeOffScalars = 12 * 8

// Flags of GdnDecodeParams.flags.
const (
	DecodeFlagL2Norm       = 1  // q and k are L2-normalised in the kernel
	DecodeFlagGateInKernel = 2  // g holds the raw a: g = -exp(a_log) softplus(a + dt_bias)
	DecodeFlagBetaFP32     = 4  // beta is fp32 (else the dtype of q)
	DecodeFlagBetaLogits   = 8  // beta holds logits b: beta = sigmoid(b)
	DecodeFlagNegEigval    = 16 // with DecodeFlagBetaLogits: beta = 2 sigmoid(b)
	DecodeFlagSeqlensInt64 = 32 // cu_seqlens is int64 (else int32)
	DecodeFlagVarlen       = 64 // cu_seqlens gives the sequences (else N x T)
)

// DecodeParams are the values of GdnDecodeParams; Pack lays them out.
type DecodeParams struct {
	Q, K, V, G, Beta, ALog, DtBias, Pool, Slots, O, TokenStates, CuSeqlens uintptr
	Scale                                                                  float32
	T, Hq, Hv, N, Flags                                                    int32
}

var decodeFields, decodeBytes = paramLayout(8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 4, 4, 4, 4, 4, 4)

// Pack writes the parameter block the kernel takes by value, little endian.
func (p *DecodeParams) Pack(b *[DecodeParamsBytes]byte) {
	packFields(b[:], decodeFields, []uint64{uint64(p.Q), uint64(p.K), uint64(p.V), uint64(p.G), uint64(p.Beta),
		uint64(p.ALog), uint64(p.DtBias), uint64(p.Pool), uint64(p.Slots), uint64(p.O), uint64(p.TokenStates),
		uint64(p.CuSeqlens), uint64(math.Float32bits(p.Scale)), uint64(uint32(p.T)), uint64(uint32(p.Hq)),
		uint64(uint32(p.Hv)), uint64(uint32(p.N)), uint64(uint32(p.Flags))})
}

// DecodeLayout is the state layout a decode variant is built for.
type DecodeLayout string

// The layouts of the decode variants (docs/SPEC.md, "State layout").
const (
	DecodeKV DecodeLayout = "kv" // entry (k, v) at k*128 + v
	DecodeVK DecodeLayout = "vk" // entry (k, v) at v*128 + k
)

// DecodeVariant returns the decode kernel for q, k and v of dtype dt, a
// state layout and a pool of fp32 (poolBF16 false) or bf16 states. Each
// is a separate build: the layout fixes which threads hold which state
// entries, and the pool's dtype the width of what a 16-byte load holds.
func DecodeVariant(dt CoreDtype, layout DecodeLayout, poolBF16 bool) (Variant, error) {
	fp16, err := fp16Define(dt, "decode")
	if err != nil {
		return Variant{}, err
	}
	vk := 0
	switch layout {
	case DecodeKV:
	case DecodeVK:
		vk = 1
	default:
		return Variant{}, fmt.Errorf("kernsrc: decode layout %q: want %q or %q", layout, DecodeKV, DecodeVK)
	}
	pool, poolBits := "f32", 0
	if poolBF16 {
		pool, poolBits = "bf16", 1
	}
	return Variant{Name: fmt.Sprintf("%s_%s_%s_%spool", DecodeKernel, dt, layout, pool), File: "gdn_decode.cu",
		Kernel: DecodeKernel, Defines: []string{
			fmt.Sprintf("GDN_FP16=%d", fp16),
			fmt.Sprintf("GDN_DECODE_VK=%d", vk),
			fmt.Sprintf("GDN_DECODE_POOL_BF16=%d", poolBits),
			fmt.Sprintf("GDN_DECODE_THREADS=%d", DecodeThreads),
			fmt.Sprintf("GDN_DECODE_COLUMNS=%d", DecodeColumns),
			fmt.Sprintf("GDN_DECODE_MAX_TOKENS=%d", DecodeMaxTokens),
			fmt.Sprintf("GDN_DECODE_PARAMS_BYTES=%d", DecodeParamsBytes),
			fmt.Sprintf("GDN_DECODE_OFF_SCALARS=%d", DecodeOffScalars),
			fmt.Sprintf("GDN_DECODE_FLAG_L2NORM=%d", DecodeFlagL2Norm),
			fmt.Sprintf("GDN_DECODE_FLAG_GATE=%d", DecodeFlagGateInKernel),
			fmt.Sprintf("GDN_DECODE_FLAG_BETA_FP32=%d", DecodeFlagBetaFP32),
			fmt.Sprintf("GDN_DECODE_FLAG_BETA_LOGITS=%d", DecodeFlagBetaLogits),
			fmt.Sprintf("GDN_DECODE_FLAG_NEG_EIGVAL=%d", DecodeFlagNegEigval),
			fmt.Sprintf("GDN_DECODE_FLAG_SEQLENS_INT64=%d", DecodeFlagSeqlensInt64),
			fmt.Sprintf("GDN_DECODE_FLAG_VARLEN=%d", DecodeFlagVarlen),
		}}, nil
}

// DecodeVariants lists every decode variant: each input dtype, layout and
// pool dtype.
func DecodeVariants() []Variant {
	var out []Variant
	for _, dt := range []CoreDtype{CoreBF16, CoreFP16} {
		for _, l := range []DecodeLayout{DecodeKV, DecodeVK} {
			for _, bf := range []bool{false, true} {
				v, _ := DecodeVariant(dt, l, bf)
				out = append(out, v)
			}
		}
	}
	return out
}
