package driver

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Args packs kernel arguments in declaration order. Values are copied into
// one buffer, each at an offset aligned as the kernel ABI aligns it (8 for
// pointers and 64-bit values, 4 for 32-bit values, the given alignment for
// Bytes), so no Go pointer ever reaches C. The zero value and a nil *Args are
// empty argument lists; every adder returns its receiver (a new Args when the
// receiver is nil) for chaining:
//
//	args := new(driver.Args).Ptr(out).Ptr(in).Int32(n).Bytes(tm[:], 64)
//
// An Args may be reused for many launches (the driver copies the values at
// launch) but not modified concurrently with a launch that reads it.
type Args struct {
	buf   []byte
	offs  []uint32
	sizes []uint32
	align int
	err   error
}

// NewArgs returns an empty argument list.
func NewArgs() *Args { return new(Args) }

func (a *Args) put(b []byte, align int) *Args {
	if a == nil {
		a = new(Args)
	}
	if a.err != nil {
		return a
	}
	if align <= 0 || align&(align-1) != 0 || align > 256 {
		a.err = fmt.Errorf("driver: Args argument %d: alignment %d is not a power of two in [1, 256]", len(a.offs), align)
		return a
	}
	if len(b) == 0 {
		a.err = fmt.Errorf("driver: Args argument %d: empty value", len(a.offs))
		return a
	}
	off := (len(a.buf) + align - 1) &^ (align - 1)
	for len(a.buf) < off {
		a.buf = append(a.buf, 0)
	}
	a.buf = append(a.buf, b...)
	a.offs = append(a.offs, uint32(off))
	a.sizes = append(a.sizes, uint32(len(b)))
	if align > a.align {
		a.align = align
	}
	return a
}

// Ptr appends a device pointer (8 bytes, 8-aligned).
func (a *Args) Ptr(p DevicePtr) *Args { return a.Uint64(uint64(p)) }

// Int32 appends an int (4 bytes).
func (a *Args) Int32(v int32) *Args { return a.Uint32(uint32(v)) }

// Uint32 appends an unsigned int (4 bytes).
func (a *Args) Uint32(v uint32) *Args {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return a.put(b[:], 4)
}

// Int64 appends a long long (8 bytes, 8-aligned).
func (a *Args) Int64(v int64) *Args { return a.Uint64(uint64(v)) }

// Uint64 appends an unsigned long long (8 bytes, 8-aligned).
func (a *Args) Uint64(v uint64) *Args {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return a.put(b[:], 8)
}

// Float32 appends a float (4 bytes).
func (a *Args) Float32(v float32) *Args { return a.Uint32(math.Float32bits(v)) }

// Float64 appends a double (8 bytes, 8-aligned).
func (a *Args) Float64(v float64) *Args { return a.Uint64(math.Float64bits(v)) }

// Bytes appends a by-value struct given as its bytes, aligned to align (a
// power of two), e.g. a CUtensorMap: Bytes(tm[:], 64). The bytes are copied.
func (a *Args) Bytes(b []byte, align int) *Args { return a.put(b, align) }

// Len returns the number of arguments.
func (a *Args) Len() int {
	if a == nil {
		return 0
	}
	return len(a.offs)
}

// Size returns the size in bytes of the packed buffer (the end of the last
// argument, without tail padding).
func (a *Args) Size() int {
	if a == nil {
		return 0
	}
	return len(a.buf)
}

// Offset returns the byte offset of argument i in the packed buffer, or -1
// when i is out of range.
func (a *Args) Offset(i int) int {
	if a == nil || i < 0 || i >= len(a.offs) {
		return -1
	}
	return int(a.offs[i])
}

// Buffer returns a copy of the packed argument buffer (the layout that
// CU_LAUNCH_PARAM_BUFFER_POINTER expects).
func (a *Args) Buffer() []byte {
	if a == nil {
		return nil
	}
	return append([]byte(nil), a.buf...)
}

// Err returns the first error recorded by an adder (a bad alignment or an
// empty value); Launch and SetKernelNodeArgs return it too.
func (a *Args) Err() error {
	if a == nil {
		return nil
	}
	return a.err
}

// Reset empties the list, keeping its storage.
func (a *Args) Reset() {
	if a == nil {
		return
	}
	a.buf, a.offs, a.sizes, a.align, a.err = a.buf[:0], a.offs[:0], a.sizes[:0], 0, nil
}
