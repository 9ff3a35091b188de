package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func benchView(b *testing.B, n int) (*View, [][32]byte) {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	v := mustView(b, randomNodes(r, n)...)
	keys := make([][32]byte, 1024)
	for i := range keys {
		keys[i] = randKey(r)
	}
	return v, keys
}

func BenchmarkOwner(b *testing.B) {
	for _, n := range []int{3, 10, 100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			v, keys := benchView(b, n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				v.Owner(keys[i%len(keys)])
				i++
			}
		})
	}
}

func BenchmarkCandidates(b *testing.B) {
	for _, n := range []int{3, 10, 100, 1000} {
		for _, k := range []int{2, 3, 8} {
			b.Run(fmt.Sprintf("nodes=%d/n=%d", n, k), func(b *testing.B) {
				v, keys := benchView(b, n)
				dst := make([]int, k)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					v.Candidates(keys[i%len(keys)], dst)
					i++
				}
			})
		}
	}
	b.Run("nodes=1000/n=1000", func(b *testing.B) {
		v, keys := benchView(b, 1000)
		dst := make([]int, 1000)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			v.Candidates(keys[i%len(keys)], dst)
			i++
		}
	})
}

func BenchmarkNewView(b *testing.B) {
	for _, n := range []int{3, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			nodes := randomNodes(rand.New(rand.NewPCG(1, 2)), n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := NewView(nodes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
