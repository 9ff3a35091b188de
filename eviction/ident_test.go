package eviction

import (
	"math/rand/v2"
	"testing"
)

// TestIdentDecidesAlike: a queue told its pages' Key, Group and Bytes by
// Config.Ident decides exactly as one that keeps them itself, through
// inserts, hits, pins, children, admissions, evictions, removals and
// summaries, for every kind.
func TestIdentDecidesAlike(t *testing.T) {
	seed := testSeed(t)
	for _, kind := range []Kind{KindLRU, KindLFU, KindGDSFBytes, KindCost} {
		r := rand.New(rand.NewPCG(seed, 2))
		known := map[Handle]Ident{}
		cfg := Config{Kind: kind, Capacity: 64, CapacityBytes: 200 << 10, CapacityAdmission: true}
		own := mustNew(t, cfg)
		cfg.Ident = func(h Handle) Ident {
			id, ok := known[h]
			if !ok {
				t.Fatalf("%s: Ident of untracked handle %d", kind, h)
			}
			return id
		}
		told := mustNew(t, cfg)
		if len(told.ids) != 0 {
			t.Fatalf("%s: a queue given Ident keeps %d idents", kind, len(told.ids))
		}
		var live []Handle
		same := func(step int, what string, a, b any) {
			t.Helper()
			if a != b {
				t.Fatalf("%s step %d: %s %v with its own idents, %v told them", kind, step, what, a, b)
			}
		}
		for step := range 20000 {
			p := Page{Key: uint64(r.IntN(400)), Bytes: int64(1024 + r.IntN(8192)), Depth: uint32(r.IntN(200)),
				Group: uint32(r.IntN(3)), ChainDepth: uint32(r.IntN(300))}
			own.Record(p.Key)
			told.Record(p.Key)
			switch op := r.IntN(10); {
			case op < 4 || len(live) == 0:
				if step%500 == 0 {
					own.SetCutoff(own.WorthOf(p))
					told.SetCutoff(told.WorthOf(p))
				}
				a, b := own.Admit(p), told.Admit(p)
				same(step, "Admit", a, b)
				if !a {
					continue
				}
				for own.Bytes()+p.Bytes > 200<<10 {
					v, ok := own.Victim()
					w, _ := told.Victim()
					same(step, "victim", v, w)
					if !ok {
						break
					}
					own.Evict(v)
					told.Evict(w)
					delete(known, v)
					for i, h := range live {
						if h == v {
							live = append(live[:i], live[i+1:]...)
							break
						}
					}
				}
				h := own.Insert(p)
				known[h] = Ident{Key: p.Key, Group: p.Group, Bytes: p.Bytes}
				same(step, "handle", h, told.Insert(p))
				live = append(live, h)
			case op < 7:
				h := live[r.IntN(len(live))]
				own.Hit(h)
				told.Hit(h)
			case op == 7:
				h := live[r.IntN(len(live))]
				if own.Pinned(h) {
					own.Unpin(h)
					told.Unpin(h)
				} else {
					own.Pin(h)
					told.Pin(h)
				}
			case op == 8:
				h := live[r.IntN(len(live))]
				own.ChildAdded(h, false)
				told.ChildAdded(h, false)
			default:
				i := r.IntN(len(live))
				h := live[i]
				if own.Pinned(h) {
					continue
				}
				own.Remove(h)
				told.Remove(h)
				delete(known, h)
				live = append(live[:i], live[i+1:]...)
			}
			same(step, "Len", own.Len(), told.Len())
			same(step, "Bytes", own.Bytes(), told.Bytes())
			same(step, "Evicted", own.Evicted(), told.Evicted())
			same(step, "Clock", own.Clock(), told.Clock())
			same(step, "HalfLife", own.HalfLife(), told.HalfLife())
		}
		var a, b Summary
		own.Summarize(&a)
		told.Summarize(&b)
		same(-1, "Summary", a, b)
		for _, h := range live {
			same(-1, "Value", own.Value(h), told.Value(h))
		}
	}
}
