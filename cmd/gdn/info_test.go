package main

import (
	"testing"

	"github.com/gdnjit/gdn/driver"
)

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
