//go:build rdma && linux && cgo

package transport

// The verbs backend: RDMA READ and WRITE over a reliable-connected queue
// pair, through libibverbs (the only package that links it). One side
// registers the memory peers may access (the node: its host arena), the
// other registers the buffers it reads into and writes from; they swap
// Endpoints out of band (over the shm or gRPC control path) and Connect.
//
// Readers over verbs hold a lease on the pages they read: the generation
// re-check of the shm backend needs the generations mapped, which a remote
// reader does not have.

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

// strata_close releases what strata_open and OpenVerbs made, in reverse
// order; any may be NULL.
static void strata_close(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, struct ibv_pd *pd,
		struct ibv_context *ctx) {
	if (qp) ibv_destroy_qp(qp);
	if (cq) ibv_destroy_cq(cq);
	if (mr) ibv_dereg_mr(mr);
	if (pd) ibv_dealloc_pd(pd);
	if (ctx) ibv_close_device(ctx);
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
	"unsafe"
)

// Verbs is one reliable-connected queue pair and the memory region
// registered on it. It is not safe for concurrent use.
type Verbs struct {
	cfg    VerbsConfig
	ctx    *C.struct_ibv_context
	pd     *C.struct_ibv_pd
	cq     *C.struct_ibv_cq
	qp     *C.struct_ibv_qp
	mr     *C.struct_ibv_mr
	mem    []byte
	psn    uint32
	remote Endpoint
}

// VerbsDevices returns how many RDMA devices ibv_get_device_list reports.
func VerbsDevices() int { return int(C.strata_num_devices()) }

// OpenVerbs opens the device and creates the protection domain, completion
// queue and queue pair. With no RDMA device it fails with ErrNoVerbs.
func OpenVerbs(cfg VerbsConfig) (*Verbs, error) {
	if cfg.Port <= 0 {
		cfg.Port = 1
	}
	if cfg.Depth <= 0 {
		cfg.Depth = 64
	}
	if VerbsDevices() == 0 {
		return nil, fmt.Errorf("no RDMA device (ibv_get_device_list is empty): %w", ErrNoVerbs)
	}
	name := C.CString(cfg.Device)
	defer C.free(unsafe.Pointer(name))
	v := &Verbs{cfg: cfg, psn: rand.Uint32() & 0xffffff}
	if v.ctx = C.strata_open(name); v.ctx == nil {
		return nil, fmt.Errorf("opening RDMA device %q: %w", cfg.Device, ErrNoVerbs)
	}
	if v.pd = C.ibv_alloc_pd(v.ctx); v.pd == nil {
		v.Close()
		return nil, fmt.Errorf("ibv_alloc_pd failed")
	}
	if v.cq = C.ibv_create_cq(v.ctx, C.int(cfg.Depth), nil, nil, 0); v.cq == nil {
		v.Close()
		return nil, fmt.Errorf("ibv_create_cq failed")
	}
	if v.qp = C.strata_create_qp(v.pd, v.cq, C.int(cfg.Depth)); v.qp == nil {
		v.Close()
		return nil, fmt.Errorf("ibv_create_qp failed")
	}
	if rc := C.strata_to_init(v.qp, C.int(cfg.Port)); rc != 0 {
		v.Close()
		return nil, fmt.Errorf("queue pair to INIT: errno %d", rc)
	}
	return v, nil
}

// Register registers mem (the node's arena, or a client's buffers) for
// local and remote access. mem must not move: memory from mmap, not the Go
// heap.
func (v *Verbs) Register(mem []byte) error {
	if len(mem) == 0 {
		return fmt.Errorf("registering no memory: %w", ErrOutOfRange)
	}
	access := C.IBV_ACCESS_LOCAL_WRITE | C.IBV_ACCESS_REMOTE_READ | C.IBV_ACCESS_REMOTE_WRITE
	v.mr = C.ibv_reg_mr(v.pd, unsafe.Pointer(&mem[0]), C.size_t(len(mem)), C.int(access))
	if v.mr == nil {
		return fmt.Errorf("ibv_reg_mr of %d bytes failed", len(mem))
	}
	v.mem = mem
	return nil
}

// Local is this side's endpoint, for the peer's Connect.
func (v *Verbs) Local() (Endpoint, error) {
	var e Endpoint
	var lid C.uint16_t
	if C.strata_query(v.ctx, C.int(v.cfg.Port), C.int(v.cfg.GIDIndex), &lid, (*C.uint8_t)(unsafe.Pointer(&e.GID[0]))) != 0 {
		return e, fmt.Errorf("querying port %d", v.cfg.Port)
	}
	e.LID, e.QPN, e.PSN = uint16(lid), uint32(v.qp.qp_num), v.psn
	if v.mr != nil {
		e.Addr, e.RKey, e.Size = uint64(uintptr(unsafe.Pointer(&v.mem[0]))), uint32(v.mr.rkey), uint64(len(v.mem))
	}
	return e, nil
}

// Connect moves the queue pair to ready-to-send towards remote.
func (v *Verbs) Connect(remote Endpoint) error {
	useGID := C.int(0)
	if remote.GID != [16]byte{} {
		useGID = 1
	}
	if rc := C.strata_to_rtr(v.qp, C.int(v.cfg.Port), C.int(v.cfg.GIDIndex), C.uint32_t(remote.QPN),
		C.uint32_t(remote.PSN), C.uint16_t(remote.LID), (*C.uint8_t)(unsafe.Pointer(&remote.GID[0])), useGID); rc != 0 {
		return fmt.Errorf("queue pair to RTR: errno %d", rc)
	}
	if rc := C.strata_to_rts(v.qp, C.uint32_t(v.psn)); rc != 0 {
		return fmt.Errorf("queue pair to RTS: errno %d", rc)
	}
	v.remote = remote
	return nil
}

// Read copies each op's remote extent into its Buf with RDMA READ. Buf
// must lie in the registered memory.
func (v *Verbs) Read(ctx context.Context, ops []Op) error { return v.run(ctx, ops, false) }

// Write copies each op's Buf into its remote extent with RDMA WRITE.
func (v *Verbs) Write(ctx context.Context, ops []Op) error { return v.run(ctx, ops, true) }

func (v *Verbs) run(ctx context.Context, ops []Op, write bool) error {
	if v.mr == nil || v.remote.RKey == 0 {
		return fmt.Errorf("verbs: not registered and connected: %w", ErrClosed)
	}
	base := uintptr(unsafe.Pointer(&v.mem[0]))
	w := C.int(0)
	if write {
		w = 1
	}
	for start := 0; start < len(ops); start += v.cfg.Depth {
		batch := ops[start:min(len(ops), start+v.cfg.Depth)]
		for i := range batch {
			op := &batch[i]
			op.OK = false
			p := uintptr(unsafe.Pointer(unsafe.SliceData(op.Buf)))
			if op.Ext.Len <= 0 || int64(len(op.Buf)) < op.Ext.Len || p < base || p+uintptr(op.Ext.Len) > base+uintptr(len(v.mem)) ||
				op.Ext.Off < 0 || uint64(op.Ext.Off+op.Ext.Len) > v.remote.Size {
				return fmt.Errorf("verbs op %d: buffer outside the registered memory or extent outside the peer's: %w", start+i, ErrOutOfRange)
			}
			if rc := C.strata_post(v.qp, w, C.uint64_t(i), unsafe.Pointer(unsafe.SliceData(op.Buf)), C.uint32_t(op.Ext.Len), v.mr.lkey,
				C.uint64_t(v.remote.Addr+uint64(op.Ext.Off)), C.uint32_t(v.remote.RKey)); rc != 0 {
				return fmt.Errorf("ibv_post_send: errno %d", rc)
			}
		}
		for done := 0; done < len(batch); {
			var status C.int
			got := int(C.strata_poll(v.cq, C.int(len(batch)-done), &status))
			if got < 0 {
				return fmt.Errorf("ibv_poll_cq failed")
			}
			if status != C.IBV_WC_SUCCESS {
				return fmt.Errorf("work completion status %d", int(status))
			}
			done += got
			if got == 0 {
				if err := ctx.Err(); err != nil {
					return err // the queue pair is unusable after this
				}
			}
		}
		for i := range batch {
			batch[i].OK = true
		}
	}
	return nil
}

// Close destroys the queue pair, completion queue, memory region and
// protection domain and closes the device.
func (v *Verbs) Close() error {
	C.strata_close(v.qp, v.cq, v.mr, v.pd, v.ctx)
	v.qp, v.cq, v.mr, v.pd, v.ctx = nil, nil, nil, nil, nil
	return nil
}
