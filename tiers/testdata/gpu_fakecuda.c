// A fake CUDA driver library for the GPU tier's tests on machines without a
// GPU: the entry points the tier binds, with device memory in malloc'd host
// memory, checking the call discipline a real driver needs (cuInit first, a
// current context for memory calls, balanced primary-context refs and
// push/pop). The tests build it with `cc -shared -fPIC` and open it through
// GPUConfig.Driver; fakecuda_* functions let them inject faults and inspect
// state. It proves the purego bindings' argument passing and the tier's
// logic, not the real driver's behaviour.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;

enum {
	SUCCESS = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3,
	NO_DEVICE = 100, INVALID_DEVICE = 101, INVALID_CONTEXT = 201,
};

#define MAX_ALLOCS 64
#define MAX_DEPTH 16

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialised;
static int init_error;              // what cuInit returns, 0 for success
static int devices = 1;             // how many devices exist
static size_t total_mem = 1 << 30;  // per device
static size_t used_mem;
static int primary_refs;            // cuDevicePrimaryCtxRetain minus releases
static int pushes;                  // pushes minus pops, all threads
static int copy_error;              // what the next copy returns, 0 for none
static int ctx_token;               // the primary context's address
static struct { char *p; size_t n; } allocs[MAX_ALLOCS];

static __thread void *ctx_stack[MAX_DEPTH];
static __thread int depth;

static int current_ok(void) {
	return depth > 0 && ctx_stack[depth - 1] == &ctx_token && primary_refs > 0;
}

// find returns the allocation holding [p, p+n), or -1.
static int find(CUdeviceptr p, size_t n) {
	for (int i = 0; i < MAX_ALLOCS; i++) {
		uintptr_t b = (uintptr_t)allocs[i].p;
		if (b != 0 && p >= b && n <= allocs[i].n && p - b <= allocs[i].n - n) return i;
	}
	return -1;
}

// Controls for the tests.
void fakecuda_reset(void) {
	pthread_mutex_lock(&mu);
	initialised = 0; init_error = 0; devices = 1; total_mem = 1 << 30;
	copy_error = 0;
	pthread_mutex_unlock(&mu);
}
void fakecuda_set_init_error(int r) { init_error = r; }
void fakecuda_set_devices(int n) { devices = n; }
void fakecuda_set_total_mem(long long n) { total_mem = (size_t)n; }
void fakecuda_set_copy_error(int r) { copy_error = r; }
int fakecuda_live_allocs(void) {
	int n = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_ALLOCS; i++) n += allocs[i].p != 0;
	pthread_mutex_unlock(&mu);
	return n;
}
int fakecuda_primary_refs(void) { return primary_refs; }
int fakecuda_pushes(void) { return pushes; }

CUresult cuInit(unsigned int flags) {
	if (flags != 0) return INVALID_VALUE;
	if (init_error) return init_error;
	initialised = 1;
	return SUCCESS;
}

CUresult cuDeviceGetCount(int *n) {
	if (!initialised) return NOT_INITIALIZED;
	*n = devices;
	return SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	if (!initialised) return NOT_INITIALIZED;
	if (ordinal < 0 || ordinal >= devices) return INVALID_DEVICE;
	*d = ordinal;
	return SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	if (!initialised) return NOT_INITIALIZED;
	if (d < 0 || d >= devices || len <= 0) return INVALID_VALUE;
	strncpy(name, "Fake CUDA Device", (size_t)len - 1);
	name[len - 1] = 0;
	return SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
	if (!initialised) return NOT_INITIALIZED;
	if (d < 0 || d >= devices) return INVALID_DEVICE;
	__sync_fetch_and_add(&primary_refs, 1);
	*c = &ctx_token;
	return SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	if (d < 0 || d >= devices || primary_refs <= 0) return INVALID_CONTEXT;
	__sync_fetch_and_sub(&primary_refs, 1);
	return SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext c) {
	if (c != &ctx_token || primary_refs <= 0 || depth == MAX_DEPTH) return INVALID_CONTEXT;
	ctx_stack[depth++] = c;
	__sync_fetch_and_add(&pushes, 1);
	return SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *c) {
	if (depth == 0) return INVALID_CONTEXT;
	*c = ctx_stack[--depth];
	__sync_fetch_and_sub(&pushes, 1);
	return SUCCESS;
}

CUresult cuCtxSynchronize(void) { return current_ok() ? SUCCESS : INVALID_CONTEXT; }

CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
	if (!current_ok()) return INVALID_CONTEXT;
	pthread_mutex_lock(&mu);
	*free = total_mem - used_mem;
	*total = total_mem;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	if (!current_ok()) return INVALID_CONTEXT;
	if (n == 0) return INVALID_VALUE;
	CUresult r = OUT_OF_MEMORY;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_ALLOCS && n <= total_mem - used_mem; i++) {
		if (allocs[i].p != 0) continue;
		char *b = calloc(1, n);
		if (b == 0) break;
		allocs[i].p = b;
		allocs[i].n = n;
		used_mem += n;
		*p = (CUdeviceptr)(uintptr_t)b;
		r = SUCCESS;
		break;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
	if (!current_ok()) return INVALID_CONTEXT;
	CUresult r = INVALID_VALUE;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_ALLOCS; i++) {
		if ((CUdeviceptr)(uintptr_t)allocs[i].p != p) continue;
		free(allocs[i].p);
		used_mem -= allocs[i].n;
		allocs[i].p = 0;
		allocs[i].n = 0;
		r = SUCCESS;
		break;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

// copy_check returns what a copy of n bytes at device address p returns.
static CUresult copy_check(CUdeviceptr p, size_t n) {
	if (!current_ok()) return INVALID_CONTEXT;
	if (copy_error) return copy_error;
	pthread_mutex_lock(&mu);
	int i = find(p, n);
	pthread_mutex_unlock(&mu);
	return i < 0 ? INVALID_VALUE : SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	CUresult r = copy_check(dst, n);
	if (r == SUCCESS) memcpy((void *)(uintptr_t)dst, src, n);
	return r;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	CUresult r = copy_check(src, n);
	if (r == SUCCESS) memcpy(dst, (const void *)(uintptr_t)src, n);
	return r;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
	if (!current_ok()) return INVALID_CONTEXT;
	pthread_mutex_lock(&mu);
	int i = find(p, 1);
	pthread_mutex_unlock(&mu);
	if (i < 0 || (CUdeviceptr)(uintptr_t)allocs[i].p != p) return INVALID_VALUE;
	memset(h->reserved, 0, sizeof h->reserved);
	memcpy(h->reserved, "fakecuda", 8);
	memcpy(h->reserved + 8, &p, sizeof p);
	return SUCCESS;
}

static const char *names[][2] = {
	{"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{"CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{"CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{"CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{"CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
};

static int name_index(CUresult r) {
	switch (r) {
	case INVALID_VALUE: return 0;
	case OUT_OF_MEMORY: return 1;
	case NOT_INITIALIZED: return 2;
	case NO_DEVICE: return 3;
	case INVALID_DEVICE: return 4;
	case INVALID_CONTEXT: return 5;
	}
	return -1;
}

CUresult cuGetErrorName(CUresult r, const char **s) {
	int i = name_index(r);
	if (i < 0) return INVALID_VALUE;
	*s = names[i][0];
	return SUCCESS;
}

CUresult cuGetErrorString(CUresult r, const char **s) {
	int i = name_index(r);
	if (i < 0) return INVALID_VALUE;
	*s = names[i][1];
	return SUCCESS;
}
