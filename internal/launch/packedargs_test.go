package launch

import (
	"bytes"
	"testing"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/kernsrc"
)

// A block packed by kernsrc reaches the driver as the positional arguments
// would: the same bytes at the same offsets, one argument per field.
func TestPackedArgsArePositional(t *testing.T) {
	pp := kernsrc.PrepParams{Q: 1, K: 2, QN: 3, KN: 4, Beta: 5, G: 6, ALog: 7, DtBias: 8, GCum: 9, A2: 10, Chunks: 11, Hq: 12, Hv: 13, Flags: 14}
	var pb [kernsrc.PrepParamsBytes]byte
	pp.Pack(&pb)
	want := new(driver.Args)
	for p := driver.DevicePtr(1); p <= 11; p++ {
		want.Ptr(p)
	}
	want.Int32(12).Int32(13).Int32(14)
	if got := packedArgs(pb[:], kernsrc.PrepParamFields()); got.Len() != want.Len() || !bytes.Equal(got.Buffer(), want.Buffer()) || got.Err() != nil {
		t.Errorf("prep: %d arguments %x, want %d %x (%v)", got.Len(), got.Buffer(), want.Len(), want.Buffer(), got.Err())
	}
	sp := kernsrc.ScanParams{BM: 1, H0: 2, Starts: 3, First: 4, P: 5, Hv: 6, N: 7, Flags: 8, Slots: 9, PoolSlots: 10}
	var sb [kernsrc.ScanParamsBytes]byte
	sp.Pack(&sb)
	want = new(driver.Args).Ptr(1).Ptr(2).Ptr(3).Ptr(4).Int32(5).Int32(6).Int32(7).Int32(8).Ptr(9).Int32(10)
	if got := packedArgs(sb[:], kernsrc.ScanParamFields()); got.Len() != want.Len() || !bytes.Equal(got.Buffer(), want.Buffer()) {
		t.Errorf("scan: %x, want %x", got.Buffer(), want.Buffer())
	}
}
