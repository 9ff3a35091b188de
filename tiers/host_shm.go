package tiers

// Sharing the host arena with same-host clients.
//
// A client process maps two memfds: the arena (FD, Size bytes) and the slot
// generations (GenFD, GenWords 8-byte little-endian words). The node hands
// it, under a read lease, an extent and the index of the extent's
// generation word (GenIndex); the client copies the bytes, then loads the
// word and keeps the copy only if the word still equals ext.Gen.
//
// Why the one word suffices (Generation, which also consults slab owners,
// floors and bump, lives only in this process): the word at a slot's index
// only ever grows. Alloc writes it ext.Gen (odd) and Free ext.Gen+1 (even);
// within a span a slot's word grows by one per Alloc and Free; a span is
// uncarved only when every extent in it was freed, after raising the floor
// of each of its slabs to the highest generation it handed out; and a new
// span that covers the index (index / slots-per-slab is always one of the
// span's slabs) first writes it floor+1, above every value written there
// before. So the word equals ext.Gen while ext is live and never again once
// it is freed, whatever class reuses the bytes.
//
// Ordering: Free stores the word (a sequentially consistent atomic store)
// before the slot can be handed out and rewritten, so a reader that copied
// bytes written by a later owner and then loads the word sees a newer
// generation, provided its own loads are not reordered after the word's
// load: true on amd64; on arm64 the reader separates the copy and the load
// with a release store (the rdma package's shm reader does).

// GenFD returns the memfd holding the slot generations, for passing to
// same-host clients, which map GenWords()*8 bytes of it read-only. It stays
// owned by h and is closed by Close.
func (h *Host) GenFD() int { return h.genFD }

// GenWords returns how many 8-byte generation words GenFD holds.
func (h *Host) GenWords() int64 { return int64(len(h.gens)) }

// GenIndex returns the index of ext's generation word in GenFD. ext must be
// live (leased or reserved): for an extent that is not, it returns -1.
func (h *Host) GenIndex(ext Extent) int64 {
	if h.closed.Load() || ext.Off < 0 || ext.Off >= h.size {
		return -1
	}
	s := ext.Off / h.slabSize
	w := h.owner[s].Load()
	if w == 0 {
		return -1
	}
	cls, start := decodeOwner(w)
	cl := &h.classes[cls]
	rel := ext.Off - int64(start)*h.slabSize
	if ext.Cap != cl.size || rel%cl.size != 0 {
		return -1
	}
	idx := int64(start)*h.slotsPerSlab + rel/cl.size
	if h.gens[idx].Load() != ext.Gen {
		return -1
	}
	return idx
}
