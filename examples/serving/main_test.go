package main

import (
	"strings"
	"testing"
)

// TestServeCPU runs the serving loop with the float64 reference standing
// in for the GPU: every request is checked against the recurrence over its
// whole history, so a token skipped, repeated or run from another slot
// fails.
func TestServeCPU(t *testing.T) {
	var log strings.Builder
	st, err := serve(cpuConfig, newCPUBackend(cpuConfig), func(string, ...any) {})
	if err != nil {
		t.Fatal(err, log.String())
	}
	if st.checked != cpuConfig.Checked {
		t.Errorf("checked %d requests, want %d", st.checked, cpuConfig.Checked)
	}
	if st.decodeTokens != cpuConfig.Requests*cpuConfig.DecodeSteps {
		t.Errorf("%d decode tokens, want %d", st.decodeTokens, cpuConfig.Requests*cpuConfig.DecodeSteps)
	}
	if st.prefillCalls < 2 || st.worstState.Ratio > 1e-6 {
		t.Errorf("%d prefill calls, worst state %v: want several calls and the float64 states (rounded to float32 once)", st.prefillCalls, st.worstState)
	}
}

// TestServeCatchesAWrongLoop breaks the backend (a slot's state dropped
// between chunks) and expects the check to fail.
func TestServeCatchesAWrongLoop(t *testing.T) {
	be := &forgetful{cpuBackend: newCPUBackend(cpuConfig)}
	if _, err := serve(cpuConfig, be, func(string, ...any) {}); err == nil || !strings.Contains(err.Error(), "final state") {
		t.Fatalf("a backend that forgets a slot between chunks passed the check: %v", err)
	}
}

// forgetful clears every slot before each prefill call: chunks after the
// first start from zero.
type forgetful struct{ *cpuBackend }

func (f *forgetful) prefill(b *batch) error {
	for _, s := range b.slots {
		_ = f.clearSlot(s)
	}
	return f.cpuBackend.prefill(b)
}
