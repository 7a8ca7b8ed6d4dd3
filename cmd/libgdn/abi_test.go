package main

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestABIMirrorsHeader holds the Go mirrors (abi.go) to gdn.h's structs as
// the C compiler lays them out: the same size, and field for field the same
// name, offset and size; and gdn_struct_size to the same sizes.
func TestABIMirrorsHeader(t *testing.T) {
	for _, s := range headerStructs {
		if s.c.Size() != s.mirror.Size() {
			t.Errorf("%s: %d bytes in gdn.h, %d in %s", s.name, s.c.Size(), s.mirror.Size(), s.mirror.Name())
		}
		if got := structSize(s.which); got != int64(s.c.Size()) {
			t.Errorf("gdn_struct_size(%d) = %d, want sizeof(%s) = %d", s.which, got, s.name, s.c.Size())
		}
		if s.c.NumField() != s.mirror.NumField() {
			t.Errorf("%s: %d fields in gdn.h, %d in %s", s.name, s.c.NumField(), s.mirror.NumField(), s.mirror.Name())
			continue
		}
		for i := range s.c.NumField() {
			cf, gf := s.c.Field(i), s.mirror.Field(i)
			if cf.Name != gf.Tag.Get("c") || cf.Offset != gf.Offset || cf.Type.Size() != gf.Type.Size() {
				t.Errorf("%s field %d: gdn.h has %s at %d (%d bytes), %s.%s (c:%q) is at %d (%d bytes)",
					s.name, i, cf.Name, cf.Offset, cf.Type.Size(), s.mirror.Name(), gf.Name, gf.Tag.Get("c"), gf.Offset, gf.Type.Size())
			}
		}
	}
	if got := structSize(99); got != 0 {
		t.Errorf("gdn_struct_size(99) = %d, want 0", got)
	}
}

// TestHeaderConstants holds the Go side's status codes, dtypes, layouts and
// version to gdn.h's.
func TestHeaderConstants(t *testing.T) {
	for name, v := range headerConstants {
		if v[0] != v[1] {
			t.Errorf("%s is %d in gdn.h, %d in Go", name, v[0], v[1])
		}
	}
}

// TestHeaderDeclaresExports checks that every exported function is declared
// in gdn.h and every function gdn.h declares is exported.
func TestHeaderDeclaresExports(t *testing.T) {
	src, err := os.ReadFile("exports.go")
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := os.ReadFile("gdn.h")
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^//export (\w+)$`).FindAllStringSubmatch(string(src), -1) {
		exported[m[1]] = true
	}
	declared := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\w+ (gdn_\w+)\(`).FindAllStringSubmatch(string(hdr), -1) {
		declared[m[1]] = true
	}
	if len(exported) == 0 || !reflect.DeepEqual(exported, declared) {
		t.Errorf("exported %v, gdn.h declares %v", keys(exported), keys(declared))
	}
}

func keys(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return strings.Join(out, " ")
}
