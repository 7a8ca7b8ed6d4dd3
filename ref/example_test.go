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

// ExampleDecode verifies two speculative tokens for each of two sequences
// in one decode call, keeping every token's state, then rolls sequence 0
// back to its first token: its slot takes that token's state, which is
// what a call of the accepted token alone would have left there.
func ExampleDecode() {
	s := ref.Shape{B: 2, T: 2, Hq: 1, Hv: 1} // two sequences of two tokens
	p, err := ref.DecodeRecipe(s, 7, ref.DecodeRecipeOptions{PoolSlots: 4, L2Norm: true, BetaLogits: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	p.Options.TokenStates = true
	res, err := ref.Decode(p.Inputs, p.Pool, p.Slots, p.Options)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Token rows follow o's: sequence n's token i is row n*T + i.
	const state = 128 * 128 // one value head
	slot := p.Slots[0]
	copy(res.Pool[slot*state:][:state], res.TokenStates[0:state])

	// The accepted token alone, from the same pool.
	first := p.Inputs
	first.Shape = ref.Shape{B: 1, T: 1, Hq: 1, Hv: 1}
	first.Q, first.K, first.V = first.Q[:128], first.K[:128], first.V[:128]
	first.G, first.Beta = first.G[:1], first.Beta[:1]
	alone, err := ref.Decode(first, p.Pool, p.Slots[:1], p.Options)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("rolled-back slot equals the accepted token's call:",
		ref.Compare64(res.Pool[slot*state:][:state], alone.Pool[slot*state:][:state]).MaxAbs == 0)
	// Output:
	// rolled-back slot equals the accepted token's call: true
}
