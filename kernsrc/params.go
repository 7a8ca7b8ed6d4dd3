package kernsrc

import "encoding/binary"

// ParamField is one kernel parameter in a packed parameter block: its byte
// offset and its size, which is also its alignment (pointers and 32-bit
// values, as the CUDA ABI lays out a kernel's parameters).
type ParamField struct{ Offset, Size int }

// paramLayout lays out parameters of the given sizes, in order, as a
// kernel's parameter space: each at the next multiple of its size. It
// returns the fields and the block's size.
func paramLayout(sizes ...int) ([]ParamField, int) {
	out := make([]ParamField, len(sizes))
	n := 0
	for i, s := range sizes {
		n = (n + s - 1) / s * s
		out[i] = ParamField{Offset: n, Size: s}
		n += s
	}
	return out, n
}

// packFields writes values into b at fields' offsets, little endian: 8-byte
// fields as uint64, 4-byte ones as uint32.
func packFields(b []byte, fields []ParamField, values []uint64) {
	clear(b)
	for i, f := range fields {
		if f.Size == 8 {
			binary.LittleEndian.PutUint64(b[f.Offset:], values[i])
		} else {
			binary.LittleEndian.PutUint32(b[f.Offset:], uint32(values[i]))
		}
	}
}
