package ref_test

import (
	"fmt"

	"github.com/gdnjit/gdn/ref"
)

// Example checks the chunked steps against the recurrence on recipe inputs,
// the way a GPU test checks a kernel's output.
func Example() {
	s := ref.Shape{B: 1, T: 100, Hq: 1, Hv: 2}
	in, err := ref.Recipe(s, 1, ref.RecipeOptions{WithH0: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	oRef, htRef, _ := ref.Recurrent(in)

	gcum, _ := ref.ChunkCumsum(s, in.G)
	A, _ := ref.SolveA(s, in.K, in.Beta, gcum)
	o, ht, _ := ref.Chunked(in, gcum, A)

	fmt.Println("o:", ref.Compare64(o, oRef).Within(ref.PassO))
	fmt.Println("ht:", ref.Compare64(ht, htRef).Within(ref.PassHt))
	// Output:
	// o: <nil>
	// ht: <nil>
}

func ExampleCaseByName() {
	c, _ := ref.CaseByName("tp8_32k")
	fmt.Printf("%s: %d tokens, %.1f GFLOP, floor %.4f ms\n", c.Name, c.Shape().Tokens(), c.FLOPs()/1e9, c.FloorMs())
	// Output:
	// tp8_32k: 32768 tokens, 36.5 GFLOP, floor 0.0462 ms
}

func ExampleShape_Validate() {
	s := ref.Shape{B: 1, T: 10, Hq: 2, Hv: 4, CuSeqlens: []int{0, 4, 9}}
	fmt.Println(s.Validate())
	// Output:
	// ref: cu_seqlens: want last entry = B*T = 10, got 9: bad shape
}
