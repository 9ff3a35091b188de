//go:build rdma && linux && cgo

package rdma

// The verbs backend: RDMA READ and WRITE over reliable-connected queue
// pairs, through libibverbs (the only package that links it). doc.go has
// the shape and the invariants; the C below wraps the calls whose
// arguments are structs.

/*
#cgo LDFLAGS: -libverbs
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int strata_num_devices(void) {
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (l) ibv_free_device_list(l);
	return n;
}

// strata_open opens device name (or the first when name is empty).
static struct ibv_context *strata_open(const char *name) {
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l) return NULL;
	struct ibv_context *ctx = NULL;
	for (int i = 0; i < n; i++) {
		if (name[0] == 0 || strcmp(ibv_get_device_name(l[i]), name) == 0) {
			ctx = ibv_open_device(l[i]);
			break;
		}
	}
	ibv_free_device_list(l);
	return ctx;
}

static struct ibv_qp *strata_create_qp(struct ibv_pd *pd, struct ibv_cq *cq, int depth) {
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof a);
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = depth;
	a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	return ibv_create_qp(pd, &a);
}

static int strata_to_init(struct ibv_qp *qp, int port) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = port;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int strata_to_rtr(struct ibv_qp *qp, int port, int gid_index, uint32_t qpn, uint32_t psn,
		uint16_t lid, const uint8_t *gid, int use_gid) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qpn;
	a.rq_psn = psn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = lid;
	a.ah_attr.port_num = port;
	if (use_gid) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, gid, 16);
		a.ah_attr.grh.sgid_index = gid_index;
		a.ah_attr.grh.hop_limit = 1;
	}
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int strata_to_rts(struct ibv_qp *qp, uint32_t psn) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = psn;
	a.max_rd_atomic = 16;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

// strata_post posts one signaled RDMA READ (write == 0) or WRITE.
static int strata_post(struct ibv_qp *qp, int write, uint64_t id, void *local, uint32_t len,
		uint32_t lkey, uint64_t remote, uint32_t rkey) {
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = remote;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

// strata_poll polls up to n completions; it returns how many, or -1, and
// the first failed status in *status (IBV_WC_SUCCESS when none failed).
static int strata_poll(struct ibv_cq *cq, int n, int *status) {
	struct ibv_wc wc[16];
	if (n > 16) n = 16;
	int got = ibv_poll_cq(cq, n, wc);
	*status = IBV_WC_SUCCESS;
	for (int i = 0; i < got; i++) {
		if (wc[i].status != IBV_WC_SUCCESS && *status == IBV_WC_SUCCESS) *status = wc[i].status;
	}
	return got;
}

// strata_close_pair destroys a queue pair and its completion queue; either
// may be NULL.
static void strata_close_pair(struct ibv_qp *qp, struct ibv_cq *cq) {
	if (qp) ibv_destroy_qp(qp);
	if (cq) ibv_destroy_cq(cq);
}

// strata_close_device frees a protection domain and closes its device;
// either may be NULL.
static void strata_close_device(struct ibv_pd *pd, struct ibv_context *ctx) {
	if (pd) ibv_dealloc_pd(pd);
	if (ctx) ibv_close_device(ctx);
}

static struct ibv_mr *strata_reg(struct ibv_pd *pd, void *addr, size_t len) {
	return ibv_reg_mr(pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
}

static int strata_query(struct ibv_context *ctx, int port, int gid_index, uint16_t *lid, uint8_t *gid) {
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, port, &pa)) return -1;
	*lid = pa.lid;
	union ibv_gid g;
	if (ibv_query_gid(ctx, port, gid_index, &g)) return -1;
	memcpy(gid, g.raw, 16);
	return 0;
}
*/
import "C"

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Device is an open RDMA device and its protection domain; the regions
// registered on it and the pairs made on it share the domain. Its methods
// are safe for concurrent use.
type Device struct {
	cfg   Config
	ctx   *C.struct_ibv_context
	pd    *C.struct_ibv_pd
	mem   *Memory
	pairs atomic.Int64 // open pairs: Close refuses while any are
}

// Devices returns how many RDMA devices ibv_get_device_list reports.
func Devices() int { return int(C.strata_num_devices()) }

// Open opens the device cfg names (the first by default) and allocates
// its protection domain. With no RDMA device, or none of that name, it
// fails with ErrUnavailable.
func Open(cfg Config) (*Device, error) {
	cfg.setDefaults()
	if Devices() == 0 {
		return nil, fmt.Errorf("no RDMA device (ibv_get_device_list is empty; soft-RoCE: rdma link add rxe0 type rxe netdev IFACE): %w", ErrUnavailable)
	}
	name := C.CString(cfg.Device)
	defer C.free(unsafe.Pointer(name))
	d := &Device{cfg: cfg}
	if d.ctx = C.strata_open(name); d.ctx == nil {
		return nil, fmt.Errorf("opening RDMA device %q (ibv_devices lists them): %w", cfg.Device, ErrUnavailable)
	}
	if d.pd = C.ibv_alloc_pd(d.ctx); d.pd == nil {
		C.strata_close_device(nil, d.ctx)
		return nil, fmt.Errorf("ibv_alloc_pd on %q failed", cfg.Device)
	}
	d.mem = newMemory(verbsMemory{d.pd})
	return d, nil
}

// verbsMemory registers memory on a protection domain.
type verbsMemory struct{ pd *C.struct_ibv_pd }

func (v verbsMemory) register(mem []byte) (registration, error) {
	mr := C.strata_reg(v.pd, unsafe.Pointer(unsafe.SliceData(mem)), C.size_t(len(mem)))
	if mr == nil {
		return registration{}, fmt.Errorf("ibv_reg_mr failed")
	}
	return registration{handle: mr, lkey: uint32(mr.lkey), rkey: uint32(mr.rkey)}, nil
}

func (verbsMemory) deregister(r registration) error {
	if rc := C.ibv_dereg_mr(r.handle.(*C.struct_ibv_mr)); rc != 0 {
		return fmt.Errorf("ibv_dereg_mr: errno %d", int(rc))
	}
	return nil
}

// Register registers mem (memory from mmap: it must not move) for local
// and remote access.
func (d *Device) Register(mem []byte) (*Region, error) { return d.mem.Register(mem) }

// Alloc maps n bytes outside the Go heap and registers them; Deregister
// unmaps them.
func (d *Device) Alloc(n int) (*Region, error) {
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mapping %d bytes to register: %w", n, err)
	}
	r, err := d.mem.register(mem, unix.Munmap)
	if err != nil {
		_ = unix.Munmap(mem)
	}
	return r, err
}

// Name is the device's name, as ibv_devices lists it.
func (d *Device) Name() string { return C.GoString(C.ibv_get_device_name(d.ctx.device)) }

// Memory is the books of the device's registered regions.
func (d *Device) Memory() *Memory { return d.mem }

// Close closes the device once its pairs are closed; regions still
// registered are deregistered and reported (ErrLeaked).
func (d *Device) Close() error {
	if n := d.pairs.Load(); n > 0 {
		return fmt.Errorf("closing an RDMA device with %d queue pairs open: %w", n, ErrLeaked)
	}
	err := d.mem.Close()
	C.strata_close_device(d.pd, d.ctx)
	d.pd, d.ctx = nil, nil
	return err
}

// Pair is one reliable-connected queue pair and its completion queue. It
// is not safe for concurrent use.
type Pair struct {
	d      *Device
	cq     *C.struct_ibv_cq
	qp     *C.struct_ibv_qp
	psn    uint32
	remote Endpoint
	ready  bool // connected and not closed
}

// Pair creates a queue pair, ready for Connect.
func (d *Device) Pair() (*Pair, error) {
	depth := C.int(d.cfg.Depth)
	p := &Pair{d: d, psn: rand.Uint32() & 0xffffff}
	if p.cq = C.ibv_create_cq(d.ctx, depth, nil, nil, 0); p.cq == nil {
		return nil, fmt.Errorf("ibv_create_cq failed")
	}
	if p.qp = C.strata_create_qp(d.pd, p.cq, depth); p.qp == nil {
		C.strata_close_pair(nil, p.cq)
		return nil, fmt.Errorf("ibv_create_qp failed")
	}
	if rc := C.strata_to_init(p.qp, C.int(d.cfg.Port)); rc != 0 {
		C.strata_close_pair(p.qp, p.cq)
		return nil, fmt.Errorf("queue pair to INIT: errno %d", int(rc))
	}
	d.pairs.Add(1)
	return p, nil
}

// Local is this side's endpoint for the peer's Connect, exposing r (nil:
// no memory) to the peer.
func (p *Pair) Local(r *Region) (Endpoint, error) {
	var e Endpoint
	var lid C.uint16_t
	cfg := p.d.cfg
	if C.strata_query(p.d.ctx, C.int(cfg.Port), C.int(cfg.GIDIndex), &lid, (*C.uint8_t)(unsafe.Pointer(&e.GID[0]))) != 0 {
		return e, fmt.Errorf("querying port %d, GID %d", cfg.Port, cfg.GIDIndex)
	}
	e.LID, e.QPN, e.PSN = uint16(lid), uint32(p.qp.qp_num), p.psn
	if r != nil {
		e.Addr, e.RKey, e.Size = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(r.mem)))), r.reg.rkey, uint64(len(r.mem))
	}
	return e, nil
}

// Connect moves the queue pair to ready-to-send towards remote.
func (p *Pair) Connect(remote Endpoint) error {
	cfg := p.d.cfg
	useGID := C.int(0)
	if remote.GID != [16]byte{} {
		useGID = 1
	}
	if rc := C.strata_to_rtr(p.qp, C.int(cfg.Port), C.int(cfg.GIDIndex), C.uint32_t(remote.QPN),
		C.uint32_t(remote.PSN), C.uint16_t(remote.LID), (*C.uint8_t)(unsafe.Pointer(&remote.GID[0])), useGID); rc != 0 {
		return fmt.Errorf("queue pair to RTR: errno %d", int(rc))
	}
	if rc := C.strata_to_rts(p.qp, C.uint32_t(p.psn)); rc != 0 {
		return fmt.Errorf("queue pair to RTS: errno %d", int(rc))
	}
	p.remote, p.ready = remote, true
	return nil
}

// Read copies each op's extent of the peer's memory into its Buf, which
// lies in local, with RDMA READ.
func (p *Pair) Read(ctx context.Context, local *Region, ops []Op) error {
	return p.run(ctx, local, ops, false)
}

// Write copies each op's Buf, which lies in local, into its extent of the
// peer's memory with RDMA WRITE.
func (p *Pair) Write(ctx context.Context, local *Region, ops []Op) error {
	return p.run(ctx, local, ops, true)
}

func (p *Pair) run(ctx context.Context, local *Region, ops []Op, write bool) error {
	if !p.ready {
		return fmt.Errorf("queue pair not connected: %w", ErrClosed)
	}
	if !local.registered() {
		return fmt.Errorf("local region: %w", ErrDeregistered)
	}
	if err := checkOps(local, p.remote, ops); err != nil {
		return err
	}
	w := C.int(0)
	if write {
		w = 1
	}
	depth := p.d.cfg.Depth
	for start := 0; start < len(ops); start += depth {
		batch := ops[start:min(len(ops), start+depth)]
		for i := range batch {
			op := &batch[i]
			op.OK = false
			if rc := C.strata_post(p.qp, w, C.uint64_t(i), unsafe.Pointer(unsafe.SliceData(op.Buf)), C.uint32_t(len(op.Buf)),
				C.uint32_t(local.reg.lkey), C.uint64_t(p.remote.Addr+uint64(op.Off)), C.uint32_t(p.remote.RKey)); rc != 0 {
				return fmt.Errorf("ibv_post_send: errno %d", int(rc))
			}
		}
		if err := p.await(ctx, len(batch)); err != nil {
			p.ready = false // posted work may still complete: the pair is not used again
			return err
		}
		for i := range batch {
			batch[i].OK = true
		}
	}
	return nil
}

// await polls the completion queue for n completions.
func (p *Pair) await(ctx context.Context, n int) error {
	for done := 0; done < n; {
		var status C.int
		got := int(C.strata_poll(p.cq, C.int(n-done), &status))
		if got < 0 {
			return fmt.Errorf("ibv_poll_cq failed")
		}
		if status != C.IBV_WC_SUCCESS {
			return fmt.Errorf("work completion status %d", int(status))
		}
		done += got
		if got == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close destroys the queue pair and its completion queue.
func (p *Pair) Close() error {
	if p.qp == nil {
		return nil
	}
	C.strata_close_pair(p.qp, p.cq)
	p.qp, p.cq, p.ready = nil, nil, false
	p.d.pairs.Add(-1)
	return nil
}
