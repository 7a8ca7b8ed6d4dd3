package dtype_test

import (
	"fmt"

	"github.com/gdnjit/gdn/dtype"
)

// Rounding to bfloat16 keeps 8 significant bits, ties to even: 1 + 2^-8
// lies halfway between 1 and 1 + 2^-7 and goes to 1.
func ExampleRoundBF16() {
	for _, x := range []float32{1, 1 + 1.0/256, 1 + 3.0/256, 65519} {
		b := dtype.RoundBF16(x)
		fmt.Printf("%v -> %#04x -> %v\n", x, b, dtype.BF16ToFloat32(b))
	}
	d, err := dtype.Parse("fp16")
	fmt.Println(d, d.Size(), err)
	// Output:
	// 1 -> 0x3f80 -> 1
	// 1.0039062 -> 0x3f80 -> 1
	// 1.0117188 -> 0x3f82 -> 1.015625
	// 65519 -> 0x4780 -> 65536
	// fp16 2 <nil>
}
