package main

import (
	"reflect"
	"strings"
	"testing"
)

// TestServeSpecRoundTrip draws serving problems and reads their spec
// strings back, through the soak's own parser, to the same problem.
func TestServeSpecRoundTrip(t *testing.T) {
	serving := 0
	for k := range 400 {
		p := drawSoakProblem(11, k)
		if p.Serve == nil {
			continue
		}
		serving++
		back, err := parseSoakProblem(p.String())
		if err != nil {
			t.Fatalf("case %d: %v", k, err)
		}
		if !reflect.DeepEqual(back, p) {
			t.Fatalf("case %d: %s read back as %s", k, p, back)
		}
		sp := p.Serve
		if s := sp.shape(); s.Tokens()*sp.Hv > serveTokenHeads || sp.Slots < s.N() || sp.Slots > serveMaxSlots {
			t.Errorf("case %d: %s is over the serving sizes", k, sp)
		}
	}
	if serving < 60 || serving > 140 {
		t.Errorf("%d serving problems in 400, want about one in four", serving)
	}
}

func TestServeSpecRefused(t *testing.T) {
	good := "serve=decode,seed=1,Hq=1,Hv=2,lens=1+8,dtype=bf16,slots=3,fresh=0,pool=fp32,layout=vk,l2norm=1,gate=0,logits=1,neg_eigval=1,token_states=1"
	if _, err := parseServeProblem(good); err != nil {
		t.Fatalf("good spec: %v", err)
	}
	for _, c := range []struct{ edit, want string }{
		{"lens=1+9", "decode sequence of 9 tokens"},
		{"slots=1", "slots = 1"},
		{"logits=0", "neg_eigval=1 needs logits=1"},
		{"Hq=4", "not a multiple"},
		{"fresh=1", "fresh"},
		{"token_states=1,checkpoint=64", "checkpoint is a prefill's"},
		{"layout=xy", "layout"},
	} {
		key := strings.SplitN(c.edit, "=", 2)[0]
		var kept []string
		for _, kv := range strings.Split(good, ",") {
			if !strings.HasPrefix(kv, key+"=") {
				kept = append(kept, kv)
			}
		}
		spec := strings.Join(append(kept, c.edit), ",")
		if _, err := parseServeProblem(spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.edit, err, c.want)
		}
	}
	if _, err := parseServeProblem(strings.Replace(good, ",token_states=1", "", 1)); err == nil || !strings.Contains(err.Error(), "token_states is missing") {
		t.Errorf("missing key: %v", err)
	}
}
