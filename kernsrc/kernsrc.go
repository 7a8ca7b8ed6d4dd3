// Package kernsrc holds the CUDA C++ kernel sources of gdn, embedded into the
// Go binary, and the catalogue of kernel variants built from them.
//
// The sources are self-contained: no CUDA toolkit header is needed at run
// time. Every .cuh file is handed to NVRTC as an include header by name, and
// each Variant names its main .cu file, its entry point (an extern "C" name,
// or the name expression of a kernel template's instance) and the -D
// defines that check its contract with the Go side.
package kernsrc

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
)

//go:embed *.cu *.cuh
var files embed.FS

// Source returns the text of one embedded file (a .cu or .cuh name).
func Source(name string) (string, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("kernsrc: no embedded source %q", name)
	}
	return string(b), nil
}

// Headers returns every embedded .cuh file by name; NVRTC receives them all as
// include headers so a kernel may include any of them.
func Headers() map[string]string {
	out := map[string]string{}
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".cuh") {
			b, _ := files.ReadFile(e.Name())
			out[e.Name()] = string(b)
		}
	}
	return out
}

var digestOnce = sync.OnceValue(func() string {
	h := sha256.New()
	entries, _ := fs.ReadDir(files, ".")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		b, _ := files.ReadFile(n)
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
})

// Digest is a hash of every embedded file: any edit to any source changes it,
// so it belongs in every compiled-module cache key.
func Digest() string { return digestOnce() }

// Variant is one compilable kernel: a main file, an entry point and the
// defines that select the instance.
type Variant struct {
	Name string // unique, stable identifier, e.g. "gdn_hopper_bf16_bv64"
	File string // the main .cu file
	// Kernel is the entry point: an extern "C" name, or the name expression
	// of a kernel template's instance (HopperCfg.Entry).
	Kernel  string
	Defines []string // "NAME=VALUE" or "NAME", passed as -D options
	// Text is the main file's text when File is not one of this package's
	// files (a lab build, package kernsrc/lab); empty otherwise.
	Text string
}

// Options returns the variant's -D options in a stable order.
func (v Variant) Options() []string {
	out := make([]string, 0, len(v.Defines))
	for _, d := range v.Defines {
		out = append(out, "-D"+d)
	}
	return out
}

// Source returns the variant's main file.
func (v Variant) Source() (string, error) {
	if v.Text != "" {
		return v.Text, nil
	}
	return Source(v.File)
}

// Catalogue lists every variant the project ships: the warm-up tool compiles
// them all and CI checks each for register spills.
func Catalogue() []Variant {
	out := append([]Variant(nil), TestVariants()...)
	out = append(out, HopperVariants()...)
	out = append(out, HopperStatesVariants()...)
	out = append(out, PrepVariants()...)
	out = append(out, DecodeVariants()...)
	out = append(out, ScanVariants()...)
	return append(out, ScanStatesVariants()...)
}

// Lookup returns the catalogue entry with the given name.
func Lookup(name string) (Variant, bool) {
	for _, v := range Catalogue() {
		if v.Name == name {
			return v, true
		}
	}
	return Variant{}, false
}
