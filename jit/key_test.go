package jit

import "testing"

func TestKeyChanges(t *testing.T) {
	base := Request{
		Name:    "k",
		Source:  "extern \"C\" __global__ void k() {}",
		Headers: map[string]string{"a.cuh": "// a", "b.cuh": "// b"},
		Options: []string{"-DX=1"},
		Entries: []string{"k"},
		Target:  sm90a,
	}
	k0 := Key(base, 12, 4)
	if len(k0) != 64 {
		t.Fatalf("key %q is not hex sha256", k0)
	}
	if Key(base, 12, 4) != k0 {
		t.Fatal("key is not deterministic")
	}
	same := base
	same.Headers = map[string]string{"b.cuh": "// b", "a.cuh": "// a"}
	if Key(same, 12, 4) != k0 {
		t.Error("key depends on header map order")
	}
	for name, change := range map[string]func(r *Request) (int, int){
		"name":   func(r *Request) (int, int) { r.Name = "k2"; return 12, 4 },
		"source": func(r *Request) (int, int) { r.Source += " "; return 12, 4 },
		"header text": func(r *Request) (int, int) {
			r.Headers = map[string]string{"a.cuh": "// A", "b.cuh": "// b"}
			return 12, 4
		},
		"header name": func(r *Request) (int, int) {
			r.Headers = map[string]string{"c.cuh": "// a", "b.cuh": "// b"}
			return 12, 4
		},
		"option": func(r *Request) (int, int) { r.Options = []string{"-DX=2"}; return 12, 4 },
		"option added": func(r *Request) (int, int) {
			r.Options = []string{"-DX=1", "-lineinfo"}
			return 12, 4
		},
		"entries":       func(r *Request) (int, int) { r.Entries = []string{"k", "j"}; return 12, 4 },
		"arch":          func(r *Request) (int, int) { r.Target = Target{Major: 9, Minor: 0}; return 12, 4 },
		"arch ptx":      func(r *Request) (int, int) { r.Target = Target{Major: 9, Minor: 0, PTX: true}; return 12, 4 },
		"arch 80":       func(r *Request) (int, int) { r.Target = Target{Major: 8, Minor: 0}; return 12, 4 },
		"nvrtc minor":   func(r *Request) (int, int) { return 12, 5 },
		"nvrtc major":   func(r *Request) (int, int) { return 13, 4 },
		"file name":     func(r *Request) (int, int) { r.File = "other.cu"; return 12, 4 },
		"field borders": func(r *Request) (int, int) { r.Name, r.Source = "k"+r.Source[:1], r.Source[1:]; return 12, 4 },
	} {
		r := base
		major, minor := change(&r)
		if Key(r, major, minor) == k0 {
			t.Errorf("changing the %s leaves the key unchanged", name)
		}
	}
}
