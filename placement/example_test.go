package placement_test

import (
	"crypto/sha256"
	"fmt"

	"github.com/stratakv/strata/placement"
)

func ExampleView() {
	const gib = 1 << 30
	v, err := placement.NewView([]placement.Node{
		{ID: "10.0.0.1:7420", Weight: 64 * gib},
		{ID: "10.0.0.2:7420", Weight: 64 * gib},
		{ID: "10.0.0.3:7420", Weight: 128 * gib},
	})
	if err != nil {
		panic(err)
	}
	var buf [2]int // owner and spill candidate, without allocating
	for _, page := range []string{"page 0", "page 1", "page 2"} {
		c := v.Candidates(sha256.Sum256([]byte(page)), buf[:])
		fmt.Printf("%s: owner %s, spill %s\n", page, v.Node(c[0]).ID, v.Node(c[1]).ID)
	}
	// Output:
	// page 0: owner 10.0.0.2:7420, spill 10.0.0.3:7420
	// page 1: owner 10.0.0.3:7420, spill 10.0.0.1:7420
	// page 2: owner 10.0.0.1:7420, spill 10.0.0.3:7420
}
