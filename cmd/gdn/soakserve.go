package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/ref"
)

// The serving problems of `gdn soak`: decode steps, pooled prefills and
// mixed batches of both (docs/SPEC.md, "The serving layer"), drawn beside the forward problems
// and written as their own spec strings, which begin with "serve=".

// serveProblem is one serving problem.
type serveProblem struct {
	Kind                         string // serveDecode, servePrefill or serveMixed
	Seed                         uint64 // of the inputs
	Hq, Hv                       int
	Lens                         []int // the sequences, packed with cu_seqlens
	Dtype                        gdn.Dtype
	Slots                        int  // the pool's slots, at least len(Lens)
	Fresh                        int  // every Fresh-th sequence has slot -1 (0: none)
	BF16                         bool // a bf16 pool instead of fp32
	VK                           bool // the [V,K] layout instead of [K,V]
	L2Norm, Gate, Logits, NegEig bool
	// Ckpt is the checkpoint interval of a prefill (0: none); States asks
	// a decode for the state after every token.
	Ckpt   int
	States bool
}

const (
	serveDecode  = "decode"
	servePrefill = "prefill"
	serveMixed   = "mixed"
)

// keepsCheckpoints says whether the problem's kind takes checkpoints (a
// decode's sequences never reach one).
func (p serveProblem) keepsCheckpoints() bool { return p.Kind != serveDecode }

// shape is the problem's shape (packed sequences).
func (p serveProblem) shape() ref.Shape {
	cu := []int{0}
	for _, l := range p.Lens {
		cu = append(cu, cu[len(cu)-1]+l)
	}
	return ref.Shape{B: 1, T: cu[len(cu)-1], Hq: p.Hq, Hv: p.Hv, CuSeqlens: cu}
}

// The sizes of serving problems: the float64 reference runs every token
// of every head, and the pool holds Slots x Hv states in float64.
const (
	serveTokenHeads = 1 << 13
	serveMaxSlots   = 24
)

// drawServeProblem draws a serving problem from r.
func drawServeProblem(r *rand.Rand) serveProblem {
	p := serveProblem{Seed: r.Uint64(), Kind: serveDecode}
	g := []int{1, 2, 4}[r.IntN(3)]
	p.Hq = []int{1, 2, 4}[r.IntN(3)]
	p.Hv = g * p.Hq
	n := 1 + r.IntN(12)
	p.Lens = make([]int, n)
	if x := r.IntN(3); x > 0 {
		p.Kind = servePrefill
		for i := range p.Lens {
			p.Lens[i] = drawSeqLen(r) % 700
			if x == 2 && r.IntN(2) == 0 {
				p.Lens[i] = 1 + r.IntN(ref.MaxDecodeTokens)
			}
		}
		if x == 2 {
			p.Kind = serveMixed
		}
		if slices.Max(p.Lens) == 0 {
			p.Lens[0] = 1
		}
		for p.shape().Tokens()*p.Hv > serveTokenHeads {
			i := slices.Index(p.Lens, slices.Max(p.Lens))
			p.Lens[i] /= 2
		}
		if r.IntN(3) == 0 {
			p.Ckpt = ref.C * (1 + r.IntN(4))
		}
	} else {
		t := 1 + r.IntN(ref.MaxDecodeTokens)
		for i := range p.Lens {
			p.Lens[i] = t
			if r.IntN(2) == 0 {
				p.Lens[i] = 1 + r.IntN(ref.MaxDecodeTokens)
			}
		}
		p.States = r.IntN(3) == 0
	}
	p.Dtype = gdn.BF16
	if r.IntN(4) == 0 {
		p.Dtype = gdn.FP16
	}
	p.Slots = min(serveMaxSlots, n+r.IntN(6))
	if r.IntN(3) == 0 {
		p.Fresh = 2 + r.IntN(3)
	}
	p.BF16, p.VK = r.IntN(4) == 0, r.IntN(2) == 0
	p.L2Norm, p.Gate = r.IntN(2) == 0, r.IntN(2) == 0
	p.Logits = r.IntN(2) == 0
	p.NegEig = p.Logits && r.IntN(2) == 0
	return p
}

// String is the spec string that parseServeProblem reads back.
func (p serveProblem) String() string {
	b := func(x bool) string {
		if x {
			return "1"
		}
		return "0"
	}
	ls := make([]string, len(p.Lens))
	for i, l := range p.Lens {
		ls[i] = strconv.Itoa(l)
	}
	pool, layout := "fp32", "kv"
	if p.BF16 {
		pool = "bf16"
	}
	if p.VK {
		layout = "vk"
	}
	kv := []string{"serve=" + p.Kind, "seed=" + strconv.FormatUint(p.Seed, 10), fmt.Sprintf("Hq=%d", p.Hq), fmt.Sprintf("Hv=%d", p.Hv),
		"lens=" + strings.Join(ls, "+"), "dtype=" + p.Dtype.String(), fmt.Sprintf("slots=%d", p.Slots), fmt.Sprintf("fresh=%d", p.Fresh),
		"pool=" + pool, "layout=" + layout, "l2norm=" + b(p.L2Norm), "gate=" + b(p.Gate), "logits=" + b(p.Logits), "neg_eigval=" + b(p.NegEig)}
	if p.keepsCheckpoints() {
		kv = append(kv, fmt.Sprintf("checkpoint=%d", p.Ckpt))
	} else {
		kv = append(kv, "token_states="+b(p.States))
	}
	return strings.Join(kv, ",")
}

// parseServeProblem reads a serving spec string; every key is required
// (checkpoint for a prefill, token_states for a decode).
func parseServeProblem(s string) (serveProblem, error) {
	var p serveProblem
	seen, err := parseSpec(s, func(key, val string) (err error) {
		switch key {
		case "serve":
			if val != serveDecode && val != servePrefill && val != serveMixed {
				err = fmt.Errorf("want %s, %s or %s", serveDecode, servePrefill, serveMixed)
			}
			p.Kind = val
		case "seed":
			p.Seed, err = strconv.ParseUint(val, 10, 64)
		case "Hq":
			p.Hq, err = positive(val, maxSoakHeads)
		case "Hv":
			p.Hv, err = positive(val, maxSoakHeads)
		case "lens":
			p.Lens, err = parseLens(val)
		case "dtype":
			p.Dtype, err = parseDataDtype("dtype", val)
		case "slots":
			p.Slots, err = positive(val, 1<<16)
		case "fresh":
			p.Fresh, err = strconv.Atoi(val)
			if err == nil && (p.Fresh < 0 || p.Fresh == 1) {
				err = fmt.Errorf("want 0 (none) or 2 and more")
			}
		case "pool":
			p.BF16, err = choice(val, "fp32", "bf16")
		case "layout":
			p.VK, err = choice(val, "kv", "vk")
		case "l2norm":
			p.L2Norm, err = choice(val, "0", "1")
		case "gate":
			p.Gate, err = choice(val, "0", "1")
		case "logits":
			p.Logits, err = choice(val, "0", "1")
		case "neg_eigval":
			p.NegEig, err = choice(val, "0", "1")
		case "checkpoint":
			p.Ckpt, err = strconv.Atoi(val)
			if err == nil && (p.Ckpt < 0 || p.Ckpt%ref.C != 0) {
				err = fmt.Errorf("want 0 (none) or a positive multiple of %d", ref.C)
			}
		case "token_states":
			p.States, err = choice(val, "0", "1")
		default:
			err = fmt.Errorf("unknown key")
		}
		return err
	})
	if err != nil {
		return p, err
	}
	required := []string{"serve", "seed", "Hq", "Hv", "lens", "dtype", "slots", "fresh", "pool", "layout", "l2norm", "gate", "logits", "neg_eigval"}
	if p.keepsCheckpoints() {
		required = append(required, "checkpoint")
	} else {
		required = append(required, "token_states")
	}
	for _, k := range required {
		if !seen[k] {
			return p, fmt.Errorf("problem %q: %s is missing", s, k)
		}
	}
	switch {
	case p.Hv%p.Hq != 0:
		return p, fmt.Errorf("problem %q: Hv = %d is not a multiple of Hq = %d", s, p.Hv, p.Hq)
	case p.Slots < len(p.Lens) || p.Slots > serveMaxSlots:
		return p, fmt.Errorf("problem %q: slots = %d: want from the %d sequences to %d", s, p.Slots, len(p.Lens), serveMaxSlots)
	case p.NegEig && !p.Logits:
		return p, fmt.Errorf("problem %q: neg_eigval=1 needs logits=1", s)
	case !p.keepsCheckpoints() && seen["checkpoint"], p.Kind != serveDecode && seen["token_states"]:
		return p, fmt.Errorf("problem %q: checkpoint is a prefill's or a mixed batch's, token_states a decode's", s)
	}
	total := 0
	for _, l := range p.Lens {
		if p.Kind == serveDecode && (l < 1 || l > ref.MaxDecodeTokens) {
			return p, fmt.Errorf("problem %q: a decode sequence of %d tokens (want 1 to %d)", s, l, ref.MaxDecodeTokens)
		}
		total += l
	}
	if total < 1 || total*p.Hv > serveTokenHeads {
		return p, fmt.Errorf("problem %q: %d tokens x %d value heads: want 1 to %d token-heads", s, total, p.Hv, serveTokenHeads)
	}
	return p, nil
}
