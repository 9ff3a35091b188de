package store

import (
	"bytes"
	"testing"

	"github.com/stratakv/strata/namespace"
)

// FuzzPublish drives the publication path with arbitrary operation
// sequences: reserves, writes at arbitrary offsets and lengths, commits with
// right, wrong or truncated sizes and checksums, aborts. Whatever happens,
// a visible page holds exactly the bytes whose checksum was committed, and
// after Close the tier holds exactly the published bytes.
func FuzzPublish(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 0, 2, 1, 0})
	f.Add([]byte{0, 3, 1, 5, 200, 2, 3, 1, 4, 3})
	f.Add([]byte{0, 0, 0, 0, 1, 0, 255, 255, 2, 0, 0, 3, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		s, tier := newTestStore(t, 4, nil)
		type open struct {
			id  uint64
			buf []byte // what the writer has written so far
		}
		var writes []open
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		for len(ops) > 0 {
			switch next() % 5 {
			case 0: // reserve key k
				k := int(next() % 6)
				res, err := s.Publisher().Reserve(testNS.ID, []PageSpec{{Key: key(k), Size: pageSize}}, 0)
				if err != nil {
					t.Fatal(err)
				}
				if res[0].Status == Reserved {
					writes = append(writes, open{id: res[0].WriteID, buf: make([]byte, 0, pageSize)})
				}
			case 1: // write a run of bytes at an offset
				if len(writes) == 0 {
					continue
				}
				w := &writes[int(next())%len(writes)]
				off, n, fill := int(next())*8, int(next())*8, next()
				p := bytes.Repeat([]byte{fill}, n)
				if err := s.Publisher().Write(testNS.ID, w.id, int64(off), p); err == nil {
					if off+n > len(w.buf) {
						w.buf = w.buf[:off+n]
					}
					copy(w.buf[off:], p)
				}
			case 2: // commit, with the right checksum of what was written or a wrong one
				if len(writes) == 0 {
					continue
				}
				i := int(next()) % len(writes)
				w := writes[i]
				sum := testNS.Checksum.Sum(w.buf)
				if next()%3 == 0 {
					sum[0] ^= 1
				}
				size := int64(pageSize)
				if next()%4 == 0 {
					size--
				}
				st, err := s.Publisher().Commit(testNS.ID, w.id, size, sum)
				if err != nil {
					t.Fatal(err)
				}
				if st == CommitCommitted {
					if len(w.buf) != pageSize {
						t.Fatalf("committed a page with %d of %d bytes written", len(w.buf), pageSize)
					}
				}
				writes = append(writes[:i], writes[i+1:]...)
			case 3: // abort
				if len(writes) == 0 {
					continue
				}
				i := int(next()) % len(writes)
				s.Publisher().Abort(testNS.ID, []uint64{writes[i].id})
				writes = append(writes[:i], writes[i+1:]...)
			case 4: // read everything back
				for k := range 6 {
					got, err := read(t, s, 0, key(k))
					if err != nil {
						t.Fatal(err)
					}
					if got[0] != nil && !bytes.Equal(testNS.Checksum.Sum(got[0]), mustStat(t, s, k)) {
						t.Fatalf("key %d: visible bytes do not match their checksum", k)
					}
				}
			}
		}
		s.Close()
		if st := s.Admin().Stats(); tier.usedBytes() != st.Bytes || st.Reservations != 0 {
			t.Fatalf("after close: tier %d bytes, index %d, %d reservations", tier.usedBytes(), st.Bytes, st.Reservations)
		}
	})
}

func nsKeys(k int) []namespace.Key { return []namespace.Key{key(k)} }

func mustStat(t *testing.T, s *Store, k int) []byte {
	t.Helper()
	infos, ok, err := s.Admin().Stat(testNS.ID, nsKeys(k))
	if err != nil || !ok[0] {
		t.Fatalf("stat of a readable key %d: %v", k, err)
	}
	return infos[0].Checksum
}
