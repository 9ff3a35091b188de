package grpcbuf

import "testing"

// TestPool: importing the package leaves gRPC's default pool alone,
// Install (once or again) makes Pool the default, and a buffer for a
// message just over a tier comes from the next tier up, not from a
// megabyte one.
func TestPool(t *testing.T) {
	if Installed() {
		t.Fatal("importing the package installed Pool")
	}
	Install()
	Install()
	if !Installed() {
		t.Fatal("Pool is not gRPC's default buffer pool after Install")
	}
	for _, n := range []int{100, 34_000, 300_000, 5 << 20, 9 << 20} {
		b := Pool.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): %d bytes", n, len(*b))
		}
		if c := cap(*b); c > 2*n && n > 256 {
			t.Fatalf("Get(%d): capacity %d, over twice the message", n, c)
		}
		for i, v := range *b {
			if v != 0 {
				t.Fatalf("Get(%d): byte %d is %d, not cleared", n, i, v)
			}
		}
		(*b)[0] = 1 // dirty it for the next Get of this tier
		Pool.Put(b)
	}
}
