package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/gdnjit/gdn/driver"
)

func TestSMsFlag(t *testing.T) {
	o, err := parseBenchArgs([]string{"--sms", "16"})
	if err != nil || o.sms != 16 {
		t.Fatalf("--sms 16: %+v, %v", o.sms, err)
	}
	if o, _ := parseBenchArgs(nil); o.sms != 0 {
		t.Errorf("default --sms %d, want 0", o.sms)
	}
	if _, err := parseBenchArgs([]string{"--sms", "-8"}); err == nil || !strings.Contains(err.Error(), "--sms -8") {
		t.Errorf("bench --sms -8: err = %v", err)
	}
	var errBuf bytes.Buffer
	stderr = &errBuf
	defer func() { stderr = os.Stderr }()
	if err := runInfo([]string{"--sms", "-1"}); err == nil || !strings.Contains(err.Error(), "--sms -1") {
		t.Errorf("info --sms -1: err = %v", err)
	}
}

func TestSMsLine(t *testing.T) {
	for _, c := range []struct {
		info driver.DeviceInfo
		want string
	}{
		{driver.DeviceInfo{SMs: 132, DeviceSMs: 132}, ""},
		{driver.DeviceInfo{SMs: 16, DeviceSMs: 132, SMsAsked: 14, Green: true}, "asked 14, got 16 of 132 (green context)"},
		{driver.DeviceInfo{SMs: 132, DeviceSMs: 132, SMsAsked: 16, GreenFallback: "driver: green contexts unavailable: x"},
			"asked 16, got 132: the whole GPU, green contexts unavailable (driver: green contexts unavailable: x)"},
	} {
		if got := smsLine(c.info); got != c.want {
			t.Errorf("smsLine(%+v) = %q, want %q", c.info, got, c.want)
		}
	}
}

// --prep-heads reaches the PrepHeads knob with --full; a negative count, or
// one without --full, is refused by name.
func TestBenchPrepHeadsFlag(t *testing.T) {
	o, err := parseBenchArgs([]string{"--full", "--prep-heads", "4"})
	if err != nil || o.prepHeads != 4 {
		t.Fatalf("--full --prep-heads 4: %+v, %v", o.prepHeads, err)
	}
	if _, err := parseBenchArgs([]string{"--full", "--prep-heads", "-1"}); err == nil || !strings.Contains(err.Error(), "--prep-heads -1") {
		t.Errorf("--prep-heads -1: %v", err)
	}
	if _, err := parseBenchArgs([]string{"--prep-heads", "4"}); err == nil || !strings.Contains(err.Error(), "--full") {
		t.Errorf("--prep-heads without --full: %v", err)
	}
}
