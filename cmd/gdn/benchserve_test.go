package main

import (
	"strings"
	"testing"

	"github.com/gdnjit/gdn"
)

func TestParseDecodeBenchArgs(t *testing.T) {
	o, err := parseDecodeBenchArgs([]string{"--decode", "--cases", "q35_b256,tp8_b256", "--pool", "bf16", "--layout", "vk"})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.cases) != 2 || o.cases[1].Hv != 8 || o.poolDtype != gdn.BF16 || o.layout != gdn.StateVK {
		t.Errorf("parsed %+v", o)
	}
	if o, err := parseDecodeBenchArgs([]string{"--decode"}); err != nil || len(o.cases) != len(decodeSuite) || o.poolDtype != gdn.FP32 {
		t.Errorf("defaults: %+v, %v", o, err)
	}
	for _, c := range []struct{ arg, want string }{
		{"--pool=fp16", "--pool fp16"}, {"--layout=kk", "--layout kk"}, {"--cases=nope", "unknown decode case"}, {"--reps=0", "at least 1"},
	} {
		if _, err := parseDecodeBenchArgs([]string{"--decode", c.arg}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.arg, err, c.want)
		}
	}
	if !hasFlag([]string{"--cases", "x", "--decode"}, "decode") || hasFlag([]string{"--", "--decode"}, "decode") {
		t.Error("hasFlag: a flag after another's value, or after --")
	}
	if hasFlag([]string{"--mixed=false"}, "mixed") || !hasFlag([]string{"-mixed"}, "mixed") {
		t.Error("hasFlag: -mixed=false and -mixed")
	}
}

func TestParseMixedBenchArgs(t *testing.T) {
	o, err := parseMixedBenchArgs([]string{"--mixed"})
	if err != nil || o.prompts != 8 || o.promptLen != 1024 || o.decodes != 256 || o.hq != 16 || o.hv != 32 {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	for _, c := range []struct{ arg, want string }{
		{"--heads=16/30", "--heads"}, {"--heads=x", "--heads"}, {"--prompt-len=8", "more than 8"}, {"--decodes=0", "at least 1"},
	} {
		if _, err := parseMixedBenchArgs([]string{"--mixed", c.arg}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.arg, err, c.want)
		}
	}
}
