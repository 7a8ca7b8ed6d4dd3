package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gdnjit/gdn"
)

func init() {
	register("run", "run the core forward on arrays from an .npz file, write o and ht to another", runRun)
}

// runSynopsis is the command line of `gdn run`.
const runSynopsis = "--in in.npz --out out.npz [--dtype bf16|fp16] [--device N]"

// runHelp describes the files `gdn run` reads and writes.
const runHelp = `in.npz holds float32 arrays q [B,T,Hq,128], k [B,T,Hq,128], v [B,T,Hv,128],
g (the chunk-local g_cumsum) [B,T,Hv], beta [B,T,Hv], A [B,T,Hv,64], and
optionally h0 [N,Hv,128,128], cu_seqlens (int32 or int64, [N+1], needs B = 1)
and scale (0-d float32 or float64). q, k and v are rounded to --dtype; g, beta,
A and h0 are used in fp32. out.npz gets o [B,T,Hv,128] and ht [N,Hv,128,128],
float32.`

func runRun(args []string) error {
	fs := newFlags("run", runSynopsis+"\n\n"+runHelp)
	in := fs.String("in", "", "input .npz (required)")
	out := fs.String("out", "", "output .npz (required)")
	dtypeName := fs.String("dtype", "bf16", "dtype q, k, v and o travel in on the GPU: bf16 or fp16")
	device := fs.Int("device", 0, "CUDA device ordinal")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dtype, err := parseDataDtype("--dtype", *dtypeName)
	if err != nil {
		return err
	}
	switch {
	case *in == "":
		return errors.New("--in is required (the input .npz)")
	case *out == "":
		return errors.New("--out is required (where o and ht go)")
	}

	arrays, err := readNpzFile(*in)
	if err != nil {
		return err
	}
	h, err := hostArgsFromNpz(arrays, dtype)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	fmt.Fprintf(stderr, "run: %s: B=%d T=%d Hq=%d Hv=%d N=%d, %v, h0 %v\n",
		*in, h.B, h.T, h.Hq, h.Hv, numSeqs(h), dtype, h.H0 != nil)

	rt, err := openRuntime(gdn.Options{Device: *device})
	if err != nil {
		return err
	}
	defer rt.Close()
	start := time.Now()
	res, err := rt.ForwardHost(h)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "run: forward on %s in %.1f ms (wall, with upload, compile on first use and download)\n",
		rt.Device().Name, float64(time.Since(start).Microseconds())/1e3)

	o := &npyArray{Shape: []int{h.B, h.T, h.Hv, gdn.HeadDim}, Data: res.O}
	ht := &npyArray{Shape: []int{numSeqs(h), h.Hv, gdn.HeadDim, gdn.HeadDim}, Data: res.Ht}
	if err := writeNpzFile(*out, []namedArray{{"o", o}, {"ht", ht}}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: o %v, ht %v (float32)\n", *out, o.Shape, ht.Shape)
	return nil
}

// openRuntime opens a gdn Runtime and turns the missing-GPU case into one
// clear sentence.
func openRuntime(opts gdn.Options) (*gdn.Runtime, error) {
	rt, err := gdn.Open(opts)
	if errors.Is(err, gdn.ErrNoCUDA) {
		return nil, fmt.Errorf("no GPU: this gdn binary was built without -tags cuda, or no CUDA driver was found (%w)", err)
	}
	return rt, err
}

// parseDataDtype reads the dtype of q, k, v and o: bf16 or fp16.
func parseDataDtype(flagName, s string) (gdn.Dtype, error) {
	d, err := gdn.ParseDtype(s)
	if err != nil || (d != gdn.BF16 && d != gdn.FP16) {
		return gdn.DtypeInvalid, fmt.Errorf("%s %q: want bf16 or fp16", flagName, s)
	}
	return d, nil
}

// numSeqs is N: the number of sequences (and of states in h0 and ht).
func numSeqs(h *gdn.HostCoreArgs) int {
	if h.CuSeqlens != nil {
		return len(h.CuSeqlens) - 1
	}
	return h.B
}

// hostArgsFromNpz checks the arrays of a `gdn run` input file and gathers
// them into the arguments of Runtime.ForwardHost (FinalState set). Errors
// name the array and say what was expected.
func hostArgsFromNpz(arrays map[string]*npyArray, dt gdn.Dtype) (*gdn.HostCoreArgs, error) {
	q, err := npzFloat32(arrays, "q", 4)
	if err != nil {
		return nil, err
	}
	B, T, Hq := q.Shape[0], q.Shape[1], q.Shape[2]
	if q.Shape[3] != gdn.HeadDim {
		return nil, fmt.Errorf("array q: shape %v: head dimension %d, want %d", q.Shape, q.Shape[3], gdn.HeadDim)
	}
	v, err := npzFloat32(arrays, "v", 4)
	if err != nil {
		return nil, err
	}
	Hv := v.Shape[2]
	h := &gdn.HostCoreArgs{B: B, T: T, Hq: Hq, Hv: Hv, Dtype: dt, FinalState: true,
		Q: q.Data.([]float32), V: v.Data.([]float32)}
	if err := npzShape("v", v, []int{B, T, Hv, gdn.HeadDim}, "[B, T, Hv, 128] with B, T from q"); err != nil {
		return nil, err
	}
	need := []struct {
		name, layout string
		shape        []int
		dst          *[]float32
	}{
		{"k", "[B, T, Hq, 128] like q", []int{B, T, Hq, gdn.HeadDim}, &h.K},
		{"g", "[B, T, Hv]", []int{B, T, Hv}, &h.G},
		{"beta", "[B, T, Hv]", []int{B, T, Hv}, &h.Beta},
		{"A", "[B, T, Hv, 64]", []int{B, T, Hv, gdn.ChunkLen}, &h.A},
	}
	for _, n := range need {
		a, err := npzFloat32(arrays, n.name, len(n.shape))
		if err != nil {
			return nil, err
		}
		if err := npzShape(n.name, a, n.shape, n.layout); err != nil {
			return nil, err
		}
		*n.dst = a.Data.([]float32)
	}
	if h.CuSeqlens, h.SeqlensDtype, err = npzCuSeqlens(arrays); err != nil {
		return nil, err
	}
	if h.Scale, err = npzScale(arrays); err != nil {
		return nil, err
	}
	if _, ok := arrays["h0"]; ok {
		a, err := npzFloat32(arrays, "h0", 4)
		if err != nil {
			return nil, err
		}
		if err := npzShape("h0", a, []int{numSeqs(h), Hv, gdn.HeadDim, gdn.HeadDim}, "[N, Hv, 128, 128]"); err != nil {
			return nil, err
		}
		h.H0 = a.Data.([]float32)
	}
	return h, nil
}

// npzFloat32 returns the float32 array called name with the given rank.
func npzFloat32(arrays map[string]*npyArray, name string, rank int) (*npyArray, error) {
	a, ok := arrays[name]
	if !ok {
		return nil, fmt.Errorf("array %s is missing (want float32, rank %d)", name, rank)
	}
	if _, ok := a.Data.([]float32); !ok {
		return nil, fmt.Errorf("array %s: dtype %s, want float32 (<f4)", name, a.descr())
	}
	if len(a.Shape) != rank {
		return nil, fmt.Errorf("array %s: rank %d (shape %v), want %d", name, len(a.Shape), a.Shape, rank)
	}
	return a, nil
}

// npzShape checks a's shape against want; layout says where want comes from.
func npzShape(name string, a *npyArray, want []int, layout string) error {
	if !slices.Equal(a.Shape, want) {
		return fmt.Errorf("array %s: shape %v, want %v (%s)", name, a.Shape, want, layout)
	}
	return nil
}

// npzCuSeqlens returns the optional cu_seqlens as ints and the dtype it
// came in (so that it travels to the GPU the same way); its values are
// checked by ForwardHost.
func npzCuSeqlens(arrays map[string]*npyArray) ([]int, gdn.Dtype, error) {
	a, ok := arrays["cu_seqlens"]
	if !ok {
		return nil, gdn.DtypeInvalid, nil
	}
	if len(a.Shape) != 1 || a.Shape[0] < 2 {
		return nil, 0, fmt.Errorf("array cu_seqlens: shape %v, want [N+1] with N >= 1 sequences", a.Shape)
	}
	switch d := a.Data.(type) {
	case []int32:
		cu := make([]int, len(d))
		for i, x := range d {
			cu[i] = int(x)
		}
		return cu, gdn.Int32, nil
	case []int64:
		cu := make([]int, len(d))
		for i, x := range d {
			if x < math.MinInt32 || x > math.MaxInt32 {
				return nil, 0, fmt.Errorf("array cu_seqlens: entry %d = %d is out of range", i, x)
			}
			cu[i] = int(x)
		}
		return cu, gdn.Int64, nil
	}
	return nil, 0, fmt.Errorf("array cu_seqlens: dtype %s, want int32 (<i4) or int64 (<i8)", a.descr())
}

// npzScale returns the optional scale, 0 (the default, 128^-0.5) when absent.
func npzScale(arrays map[string]*npyArray) (float32, error) {
	a, ok := arrays["scale"]
	if !ok {
		return 0, nil
	}
	if len(a.Shape) != 0 {
		return 0, fmt.Errorf("array scale: shape %v, want a 0-d array (a scalar)", a.Shape)
	}
	switch d := a.Data.(type) {
	case []float32:
		return d[0], nil
	case []float64:
		return float32(d[0]), nil
	}
	return 0, fmt.Errorf("array scale: dtype %s, want float32 (<f4) or float64 (<f8)", a.descr())
}
