//go:build cuda

package gdn_test

import (
	"encoding/binary"
	"math"
	"testing"
	"unsafe"

	"github.com/gdnjit/gdn"
	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/dtype"
	"github.com/gdnjit/gdn/internal/tuning"
)

// devMem holds the device buffers of one decode test, freed at its end.
type devMem struct {
	t   *testing.T
	ctx *driver.Context
}

func newDevMem(t *testing.T, r *gdn.Runtime) *devMem {
	return &devMem{t: t, ctx: tuning.Context(r)}
}

// bytesOf encodes x in dt: fp32, 16-bit floats (x representable in dt, so
// exact), int32 or int64.
func bytesOf(dt gdn.Dtype, x []float64) []byte {
	b := make([]byte, len(x)*dt.Size())
	for i, v := range x {
		switch dt {
		case gdn.FP32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
		case gdn.BF16:
			binary.LittleEndian.PutUint16(b[2*i:], dtype.RoundBF16(float32(v)))
		case gdn.FP16:
			binary.LittleEndian.PutUint16(b[2*i:], dtype.RoundFP16(float32(v)))
		case gdn.Int32:
			binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(v)))
		case gdn.Int64:
			binary.LittleEndian.PutUint64(b[8*i:], uint64(int64(v)))
		}
	}
	return b
}

// alloc returns a device buffer of n bytes (at least 1), freed when the
// test ends.
func (m *devMem) alloc(n int) uintptr {
	m.t.Helper()
	p, err := m.ctx.Alloc(max(n, 1))
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { m.ctx.Free(p) })
	return uintptr(p)
}

// tensor uploads x as a tensor of dtype dt and the given shape.
func (m *devMem) tensor(dt gdn.Dtype, x []float64, shape ...int) gdn.Tensor {
	m.t.Helper()
	b := bytesOf(dt, x)
	p := m.alloc(len(b))
	m.upload(p, b)
	return gdn.Tensor{Ptr: p, Bytes: len(b), Dtype: dt, Shape: shape}
}

func (m *devMem) upload(p uintptr, b []byte) {
	m.t.Helper()
	if len(b) == 0 {
		return
	}
	if err := m.ctx.CopyToDevice(driver.DevicePtr(p), unsafe.Pointer(&b[0]), len(b)); err != nil {
		m.t.Fatal(err)
	}
}

// ints uploads x as an Int32 or Int64 tensor of shape [len(x)].
func (m *devMem) ints(dt gdn.Dtype, x []int) gdn.Tensor {
	f := make([]float64, len(x))
	for i, v := range x {
		f[i] = float64(v)
	}
	return m.tensor(dt, f, len(x))
}

// poisoned is an output tensor filled with NaN.
func (m *devMem) poisoned(dt gdn.Dtype, shape ...int) gdn.Tensor {
	m.t.Helper()
	x := gdn.Tensor{Dtype: dt, Shape: shape}
	x.Bytes = x.Elems() * dt.Size()
	x.Ptr = m.alloc(x.Bytes)
	m.poison(x)
	return x
}

func (m *devMem) poison(x gdn.Tensor) {
	m.t.Helper()
	var err error
	if x.Dtype.Size() == 4 {
		err = m.ctx.MemsetD32(driver.DevicePtr(x.Ptr), 0x7fc00000, x.Elems(), nil)
	} else {
		err = m.ctx.MemsetD16(driver.DevicePtr(x.Ptr), 0x7fff, x.Elems(), nil)
	}
	if err != nil {
		m.t.Fatal(err)
	}
}

// staleNaN fills n bytes of fresh device memory with NaN (all ones: NaN
// in fp32, bf16 and fp16) and frees it, so that the allocations that come
// next are likely to get memory holding NaN, as they do in a long-running
// process: whatever a kernel reads that no call wrote then shows.
func (m *devMem) staleNaN(n int) {
	m.t.Helper()
	p, err := m.ctx.Alloc(n)
	if err != nil {
		m.t.Fatal(err)
	}
	if err := m.ctx.MemsetD8(p, 0xff, n, nil); err != nil {
		m.t.Fatal(err)
	}
	// Done before the memory goes back: a fill still running when the
	// slab's zeroing reused it would fail the test for nothing.
	if err := m.ctx.Synchronize(); err != nil {
		m.t.Fatal(err)
	}
	if err := m.ctx.Free(p); err != nil {
		m.t.Fatal(err)
	}
}

// bits reads a 16- or 32-bit tensor back as raw bits (16-bit values
// zero-extended).
func (m *devMem) bits(x gdn.Tensor) []uint32 {
	m.t.Helper()
	b := make([]byte, x.Elems()*x.Dtype.Size())
	if err := m.ctx.CopyToHost(unsafe.Pointer(&b[0]), driver.DevicePtr(x.Ptr), len(b)); err != nil {
		m.t.Fatal(err)
	}
	out := make([]uint32, x.Elems())
	for i := range out {
		if x.Dtype.Size() == 4 {
			out[i] = binary.LittleEndian.Uint32(b[4*i:])
		} else {
			out[i] = uint32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	}
	return out
}

// valueOf widens raw bits of dt to float64.
func valueOf(dt gdn.Dtype, b uint32) float64 {
	switch dt {
	case gdn.BF16:
		return float64(dtype.BF16ToFloat32(uint16(b)))
	case gdn.FP16:
		return float64(dtype.FP16ToFloat32(uint16(b)))
	}
	return float64(math.Float32frombits(b))
}

func valuesOf(dt gdn.Dtype, b []uint32) []float64 {
	out := make([]float64, len(b))
	for i, x := range b {
		out[i] = valueOf(dt, x)
	}
	return out
}

// checkStates holds written states to docs/SPEC.md's per-element line:
// |got - s| <= 2^-8 |s| + 1e-4 for a bf16 pool (s the float64 value
// before rounding), 1e-6 |s| + 1e-4 for fp32; NaN fails.
func checkStates(t *testing.T, what string, got, want []float64, bf16 bool) {
	t.Helper()
	rel := 1e-6
	if bf16 {
		rel = 1.0 / 256
	}
	bad, worst, at := 0, 0.0, -1
	for i, s := range want {
		d := math.Abs(got[i] - s)
		if math.IsNaN(got[i]) || d > rel*math.Abs(s)+1e-4 {
			bad++
			if math.IsNaN(d) || d > worst {
				worst, at = d, i
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d entries off the line, worst at %d: got %v, want %v", what, bad, len(want), at, got[at], want[at])
	}
}
