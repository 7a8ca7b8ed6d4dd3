package jit

import (
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Failed dlopens report their own dlerror text, also when many goroutines
// fail at once (the text is per thread and read in the failing call).
func TestDlopenErrorsAreTheirOwn(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			name := "/nonexistent/libgdn-missing-" + strconv.Itoa(i) + ".so"
			var err error
			if i%2 == 0 {
				err = dlopenGlobal(name)
			} else {
				_, err = openLib(name)
			}
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("dlopen %s: %v, want dlerror's text naming it", name, err)
			}
		})
	}
	wg.Wait()
}
