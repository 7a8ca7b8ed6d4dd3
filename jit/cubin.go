package jit

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// The .nv.info attributes a cubin keeps per function (format EIFMT_SVAL:
// a 4-byte symbol index and a 4-byte value).
const (
	nvInfoSVal      = 0x04
	eiattrFrameSize = 0x11
	eiattrRegCount  = 0x2f
)

// CubinReport reads what ptxas's report would say about a cubin's
// functions from the cubin itself: each function's registers
// (EIATTR_REGCOUNT) and stack frame (EIATTR_FRAME_SIZE) in its .nv.info
// section, kernels marked Entry (they have a .nv.info.<name> section of
// their own). Spill bytes are not kept there: a frame of local memory is
// the sign of a spill (or of a local array), so Report.Spills counts it
// for a report read this way (Report.FromCubin). NVRTC 13 returns some
// cubins without the ptxas log; this is what checks them.
func CubinReport(image []byte) (Report, error) {
	// A cubin carries its CUDA ABI version where ELF has its own version
	// (1: the identification's and the 64-bit header's e_version), which
	// debug/elf insists on.
	if len(image) >= 24 && bytes.HasPrefix(image, []byte(elf.ELFMAG)) {
		image = bytes.Clone(image)
		image[elf.EI_VERSION] = byte(elf.EV_CURRENT)
		binary.LittleEndian.PutUint32(image[20:24], uint32(elf.EV_CURRENT))
	}
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		return Report{}, fmt.Errorf("jit: not a cubin: %w", err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return Report{}, fmt.Errorf("jit: cubin symbols: %w", err)
	}
	info := f.Section(".nv.info")
	if info == nil {
		return Report{}, errors.New("jit: cubin has no .nv.info section")
	}
	b, err := info.Data()
	if err != nil {
		return Report{}, fmt.Errorf("jit: cubin .nv.info: %w", err)
	}
	r := Report{FromCubin: true}
	index := map[string]int{}
	get := func(sym uint32) *FunctionReport {
		// Symbols() leaves out the null symbol 0.
		if sym == 0 || int(sym) > len(syms) {
			return nil
		}
		name := syms[sym-1].Name
		i, ok := index[name]
		if !ok {
			i = len(r.Functions)
			index[name] = i
			r.Functions = append(r.Functions, FunctionReport{Name: name, Entry: f.Section(".nv.info."+name) != nil})
		}
		return &r.Functions[i]
	}
	for len(b) >= 4 {
		format, attr, size := b[0], b[1], int(binary.LittleEndian.Uint16(b[2:4]))
		if format != nvInfoSVal { // EIFMT_NVAL, BVAL, HVAL: the record is these four bytes
			b = b[4:]
			continue
		}
		if len(b) < 4+size {
			return Report{}, errors.New("jit: cubin .nv.info is truncated")
		}
		if size == 8 && (attr == eiattrRegCount || attr == eiattrFrameSize) {
			sym, v := binary.LittleEndian.Uint32(b[4:8]), int(binary.LittleEndian.Uint32(b[8:12]))
			if fr := get(sym); fr != nil {
				if attr == eiattrRegCount {
					fr.Registers = v
				} else {
					fr.StackFrame = v
				}
			}
		}
		b = b[4+size:]
	}
	if len(r.Functions) == 0 {
		return Report{}, errors.New("jit: cubin .nv.info names no function")
	}
	return r, nil
}

// reportOf is a compile's report: ptxas's, from the log, or, where the
// log has none (NVRTC 13, at times), the cubin's own (CubinReport). An
// empty report when neither says anything.
func reportOf(log string, image []byte) Report {
	r := ParseReport(log)
	if len(r.Functions) > 0 || strings.Contains(log, "Compiling entry function") {
		return r
	}
	if c, err := CubinReport(image); err == nil {
		c.Warnings = r.Warnings
		return c
	}
	return r
}
