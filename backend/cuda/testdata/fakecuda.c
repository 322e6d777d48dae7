// fakecuda.c: a fake libcuda.so.1 for glmrun's tests. It implements the
// driver API calls backend/cuda binds, with the real error codes and
// names; device memory is host memory; every call is appended to a log
// (fake_log); and cuLaunchKernel executes the kernel on the CPU through
// sim.cc (the same .cu sources compiled with GLM_CPU_SIM), after checking
// the launch against the .entry parameter list of the loaded PTX. Stream
// capture records launches and host-to-device copies (from memory of
// cuMemAllocHost only, as a real capture requires) into a graph instead
// of running them; an instantiated graph runs them in order when
// launched, and cuGraphExecUpdate takes a graph of the same kernels in the
// same order (new arguments and sizes), as the real one does.
//
// Environment: FAKECUDA_DEVICES (default 1; 0 makes cuInit fail with
// CUDA_ERROR_NO_DEVICE), FAKECUDA_MEM (bytes per device, default 1 GiB),
// FAKECUDA_CAPTURE_FAIL (set: every stream capture ends invalidated).
// A PTX image containing "glmrun_fake_jit_error" fails to load with
// CUDA_ERROR_INVALID_PTX and a message in the JIT error log buffer.
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent;

enum {
	SUCCESS = 0,
	INVALID_VALUE = 1,
	OUT_OF_MEMORY = 2,
	NOT_INITIALIZED = 3,
	NO_DEVICE = 100,
	INVALID_DEVICE = 101,
	INVALID_CONTEXT = 201,
	INVALID_PTX = 218,
	INVALID_HANDLE = 400,
	NOT_FOUND = 500,
	LAUNCH_FAILED = 719,
	CAPTURE_UNSUPPORTED = 900,
	CAPTURE_INVALIDATED = 901,
	CAPTURE_IMPLICIT = 906,
	GRAPH_UPDATE_FAILURE = 910,
};

static const struct {
	int code;
	const char *name, *text;
} errs[] = {
    {SUCCESS, "CUDA_SUCCESS", "no error"},
    {INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {GRAPH_UPDATE_FAILURE, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
     "the graph update was not performed because it included changes which violated constraints specific to "
     "instantiated graph update"},
};

int glm_sim_launch(const char *name, const unsigned grid[3], const unsigned block[3], unsigned shmem, void **params,
                   int nparams, const int *sizes, char *err, size_t errlen);

// Host memory passed in by the caller belongs to the Go process, whose
// synchronisation ThreadSanitizer cannot see (Go code is not instrumented):
// memory the Go runtime mapped on one thread and a copy from it on another
// look like a race. The race test is about the simulated kernels, so the
// driver reads and writes caller memory with TSan's accesses ignored, and
// kernels see their parameters through a copy in C memory.
#if defined(__SANITIZE_THREAD__)
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
static void hostCopy(void *dst, const void *src, size_t n) {
	AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
	AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
	memcpy(dst, src, n);
	AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
	AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
}
#else
static void hostCopy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
#endif

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int inited;
static char logbuf[1 << 20];
static size_t loglen;
static long launches;
// Counters of what a real GPU would pay for (fake_counters).
static long nsyncs, h2dBytes, d2hBytes, graphLaunches;
static char lastSimError[512];

static void logf_(const char *fmt, ...) {
	if (loglen >= sizeof logbuf - 256)
		return; // keep the first megabyte
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(logbuf + loglen, sizeof logbuf - loglen, fmt, ap);
	va_end(ap);
	if (n > 0)
		loglen += (size_t)n < sizeof logbuf - loglen ? (size_t)n : sizeof logbuf - loglen - 1;
}

// ---- test hooks ----
const char *fake_log(void) { return logbuf; }
void fake_log_reset(void) {
	pthread_mutex_lock(&mu);
	loglen = 0;
	logbuf[0] = 0;
	pthread_mutex_unlock(&mu);
}
long fake_launches(void) { return launches; }
// fake_counters writes the launches, stream/context/event
// synchronisations (an asynchronous copy from pageable memory counts as
// one: the driver waits for the stream before it), host-to-device and
// device-to-host bytes and graph launches so far to out[0 … 5).
void fake_counters(long *out) {
	pthread_mutex_lock(&mu);
	out[0] = launches;
	out[1] = nsyncs;
	out[2] = h2dBytes;
	out[3] = d2hBytes;
	out[4] = graphLaunches;
	pthread_mutex_unlock(&mu);
}

// Simulated time per kernel name.
static struct {
	char name[128];
	long n;
	double sec;
} stats[128];
static int nstats;
static char statbuf[16384];

static void account(const char *name, double sec) {
	int i;
	for (i = 0; i < nstats; i++)
		if (!strcmp(stats[i].name, name))
			break;
	if (i == nstats) {
		if (nstats == 128)
			return;
		snprintf(stats[nstats++].name, sizeof stats[0].name, "%s", name);
	}
	stats[i].n++;
	stats[i].sec += sec;
}

// fake_stats returns "name launches seconds" lines for the launches so far.
const char *fake_stats(void) {
	size_t n = 0;
	statbuf[0] = 0;
	for (int i = 0; i < nstats && n < sizeof statbuf - 128; i++)
		n += (size_t)snprintf(statbuf + n, sizeof statbuf - n, "%s %ld %.3f\n", stats[i].name, stats[i].n, stats[i].sec);
	return statbuf;
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int ndevices(void) {
	const char *s = getenv("FAKECUDA_DEVICES");
	return s ? atoi(s) : 1;
}
static size_t memlimit(void) {
	const char *s = getenv("FAKECUDA_MEM");
	return s ? (size_t)strtoull(s, 0, 10) : (size_t)1 << 30;
}

// ---- allocations ----
struct alloc {
	char *p;
	size_t n;
	int dev;
	struct alloc *next;
};
static struct alloc *allocs;
static size_t used[64];
static __thread int current = -1; // device of the calling thread's current context

static struct alloc *find(CUdeviceptr p, size_t n) {
	for (struct alloc *a = allocs; a; a = a->next)
		if ((char *)p >= a->p && (char *)p + n <= a->p + a->n)
			return a;
	return 0;
}

#define CHECK_INIT()                                                                                           \
	do {                                                                                                   \
		if (!inited) {                                                                                 \
			pthread_mutex_unlock(&mu);                                                             \
			return NOT_INITIALIZED;                                                                \
		}                                                                                              \
	} while (0)
#define RET(code)                                                                                              \
	do {                                                                                                   \
		CUresult r_ = (code);                                                                          \
		logf_(" -> %d\n", r_);                                                                         \
		pthread_mutex_unlock(&mu);                                                                     \
		return r_;                                                                                     \
	} while (0)

CUresult cuGetErrorName(CUresult e, const char **s) {
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
		if (errs[i].code == e) {
			*s = errs[i].name;
			return SUCCESS;
		}
	*s = 0;
	return INVALID_VALUE;
}
CUresult cuGetErrorString(CUresult e, const char **s) {
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
		if (errs[i].code == e) {
			*s = errs[i].text;
			return SUCCESS;
		}
	*s = 0;
	return INVALID_VALUE;
}

CUresult cuInit(unsigned flags) {
	pthread_mutex_lock(&mu);
	logf_("cuInit flags=%u", flags);
	if (flags != 0)
		RET(INVALID_VALUE);
	if (ndevices() <= 0)
		RET(NO_DEVICE);
	inited = 1;
	RET(SUCCESS);
}
CUresult cuDriverGetVersion(int *v) {
	*v = 12080;
	return SUCCESS;
}
CUresult cuDeviceGetCount(int *n) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuDeviceGetCount");
	*n = ndevices();
	RET(SUCCESS);
}
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuDeviceGet %d", ordinal);
	if (ordinal < 0 || ordinal >= ndevices() || ordinal >= 64)
		RET(INVALID_DEVICE);
	*d = ordinal;
	RET(SUCCESS);
}
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	if (d < 0 || d >= ndevices())
		RET(INVALID_DEVICE);
	switch (attr) {
	case 75: *v = 9; break;   // compute capability major
	case 76: *v = 0; break;   // minor
	case 16: *v = 132; break; // multiprocessors
	default: *v = 0; break;
	}
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	if (d < 0 || d >= ndevices())
		RET(INVALID_DEVICE);
	snprintf(name, (size_t)len, "glmrun fake CUDA device %d", d);
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}
CUresult cuDeviceTotalMem_v2(size_t *n, CUdevice d) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	if (d < 0 || d >= ndevices())
		RET(INVALID_DEVICE);
	*n = memlimit();
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

static int ctxTags[64];
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuDevicePrimaryCtxRetain %d", d);
	if (d < 0 || d >= ndevices())
		RET(INVALID_DEVICE);
	*c = &ctxTags[d];
	RET(SUCCESS);
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuDevicePrimaryCtxRelease_v2 %d", d);
	if (d < 0 || d >= ndevices())
		RET(INVALID_DEVICE);
	RET(SUCCESS);
}
CUresult cuCtxSetCurrent(CUcontext c) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuCtxSetCurrent");
	if (c && (c < (void *)&ctxTags[0] || c >= (void *)&ctxTags[64]))
		RET(INVALID_CONTEXT);
	current = c ? (int)((int *)c - ctxTags) : -1;
	RET(SUCCESS);
}
CUresult cuCtxSynchronize(void) {
	__atomic_fetch_add(&nsyncs, 1, __ATOMIC_RELAXED);
	return inited ? SUCCESS : NOT_INITIALIZED;
}

// A stream: whether it captures, whether that capture was invalidated,
// and the graph it records into.
struct graph;
struct stream {
	int dev;      // the device whose context was current at its creation
	int blocking; // created without CU_STREAM_NON_BLOCKING: synchronous copies wait for it
	int capturing, invalid;
	struct graph *g;
};
static int capturing[64]; // blocking streams capturing now, per device

CUresult cuStreamCreate(CUstream *s, unsigned flags) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuStreamCreate flags=%u", flags);
	struct stream *st = calloc(1, sizeof *st);
	st->dev = current < 0 ? 0 : current;
	st->blocking = !(flags & 1);
	*s = st;
	RET(SUCCESS);
}
CUresult cuStreamDestroy_v2(CUstream s) {
	free(s);
	return SUCCESS;
}
CUresult cuStreamSynchronize(CUstream s) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	struct stream *st = s;
	if (st && st->capturing) {
		st->invalid = 1;
		logf_("cuStreamSynchronize while capturing");
		RET(CAPTURE_UNSUPPORTED);
	}
	__atomic_fetch_add(&nsyncs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

CUresult cuEventCreate(CUevent *e, unsigned flags) {
	*e = calloc(1, sizeof(long));
	return inited ? SUCCESS : NOT_INITIALIZED;
}
CUresult cuEventRecord(CUevent e, CUstream s) {
	*(long *)e = launches;
	return SUCCESS;
}
CUresult cuEventSynchronize(CUevent e) { return SUCCESS; }
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
	*ms = (float)(*(long *)b - *(long *)a); // launches in between, as "milliseconds"
	return SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent e) {
	free(e);
	return SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *freeb, size_t *total) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	if (current < 0)
		RET(INVALID_CONTEXT);
	*total = memlimit();
	*freeb = memlimit() - used[current];
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuMemAlloc_v2 %zu", n);
	if (current < 0)
		RET(INVALID_CONTEXT);
	if (n == 0)
		RET(INVALID_VALUE);
	if (used[current] + n > memlimit())
		RET(OUT_OF_MEMORY);
	struct alloc *a = malloc(sizeof *a);
	a->p = malloc(n);
	memset(a->p, 0xa5, n); // like the GPU: contents undefined, but never zero by luck
	a->n = n;
	a->dev = current;
	a->next = allocs;
	allocs = a;
	used[current] += n;
	*p = (CUdeviceptr)(uintptr_t)a->p;
	RET(SUCCESS);
}
CUresult cuMemFree_v2(CUdeviceptr p) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuMemFree_v2");
	for (struct alloc **pp = &allocs; *pp; pp = &(*pp)->next) {
		struct alloc *a = *pp;
		if ((CUdeviceptr)(uintptr_t)a->p == p) {
			*pp = a->next;
			used[a->dev] -= a->n;
			free(a->p);
			free(a);
			RET(SUCCESS);
		}
	}
	RET(INVALID_VALUE);
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	if (!find(dst, n)) {
		logf_("cuMemcpyHtoD_v2 %zu bytes outside any allocation", n);
		RET(INVALID_VALUE);
	}
	hostCopy((void *)(uintptr_t)dst, src, n);
	h2dBytes += (long)n;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}
static CUresult recordCopy(struct stream *st, CUdeviceptr dst, const void *src, size_t n);
static int pinned(const void *p, size_t n);

// The stream's work runs at launch here, so an asynchronous copy is done
// on return, as a real one from pageable memory is staged by then.
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	if (!s) {
		logf_("cuMemcpyHtoDAsync_v2 on the null stream");
		RET(INVALID_HANDLE);
	}
	if (!find(dst, n)) {
		logf_("cuMemcpyHtoDAsync_v2 %zu bytes outside any allocation", n);
		RET(INVALID_VALUE);
	}
	struct stream *st = s;
	if (st->capturing) {
		CUresult r = recordCopy(st, dst, src, n);
		if (r != SUCCESS)
			logf_("cuMemcpyHtoDAsync_v2 captured from memory not of cuMemAllocHost");
		RET(r);
	}
	// From pageable memory the driver waits for the stream's earlier work
	// before the copy (CUDA's documented behaviour): count it as the
	// synchronisation it is.
	if (!pinned(src, n))
		__atomic_fetch_add(&nsyncs, 1, __ATOMIC_RELAXED);
	hostCopy((void *)(uintptr_t)dst, src, n);
	h2dBytes += (long)n;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	struct alloc *a = find(src, n);
	if (!a) {
		logf_("cuMemcpyDtoH_v2 %zu bytes outside any allocation", n);
		RET(INVALID_VALUE);
	}
	if (capturing[a->dev]) {
		logf_("cuMemcpyDtoH_v2 while a blocking stream of the device captures");
		RET(CAPTURE_IMPLICIT);
	}
	hostCopy(dst, (void *)(uintptr_t)src, n);
	d2hBytes += (long)n;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}
// Peer copies and cross-stream waits: the fake runs a stream's work when
// it is issued, so a wait has nothing to wait for and a copy is done on
// return. A copy or wait on a capturing stream is refused, as glmrun
// never captures them.
CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream s) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuMemcpyPeerAsync %zu bytes", n);
	struct stream *st = s;
	if (!st || !dctx || !sctx)
		RET(INVALID_VALUE);
	if (st->capturing)
		RET(CAPTURE_UNSUPPORTED);
	if (!find(src, n) || !find(dst, n))
		RET(INVALID_VALUE);
	memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
	RET(SUCCESS);
}
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuStreamWaitEvent");
	struct stream *st = s;
	if (!st || !e || flags)
		RET(INVALID_VALUE);
	if (st->capturing)
		RET(CAPTURE_UNSUPPORTED);
	RET(SUCCESS);
}
CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer) {
	*can = d != peer;
	return inited ? SUCCESS : NOT_INITIALIZED;
}
CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuCtxEnablePeerAccess");
	RET(peer && !flags ? SUCCESS : INVALID_VALUE);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	if (!find(src, n) || !find(dst, n)) {
		logf_("cuMemcpyDtoD_v2 %zu bytes outside any allocation", n);
		RET(INVALID_VALUE);
	}
	memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

// ---- modules ----
#define MAXPARAMS 32
struct entry {
	char name[128];
	int nparams;
	int sizes[MAXPARAMS];
};
struct module {
	int n;
	struct entry *e;
};

static int paramSize(const char *t) {
	if (!strncmp(t, ".u64", 4) || !strncmp(t, ".b64", 4) || !strncmp(t, ".s64", 4) || !strncmp(t, ".f64", 4))
		return 8;
	if (!strncmp(t, ".u32", 4) || !strncmp(t, ".b32", 4) || !strncmp(t, ".s32", 4) || !strncmp(t, ".f32", 4))
		return 4;
	if (!strncmp(t, ".u16", 4) || !strncmp(t, ".b16", 4) || !strncmp(t, ".s16", 4) || !strncmp(t, ".f16", 4))
		return 2;
	if (!strncmp(t, ".u8", 3) || !strncmp(t, ".b8", 3) || !strncmp(t, ".s8", 3))
		return 1;
	return -1;
}

// parse reads every ".entry NAME(" and its ".param .TYPE" list.
static int parse(const char *ptx, struct module *m) {
	m->n = 0;
	m->e = 0;
	for (const char *p = strstr(ptx, ".entry "); p; p = strstr(p + 1, ".entry ")) {
		const char *s = p + 7, *q = strchr(s, '(');
		if (!q || q - s >= 127)
			return -1;
		m->e = realloc(m->e, (size_t)(m->n + 1) * sizeof *m->e);
		struct entry *e = &m->e[m->n++];
		memcpy(e->name, s, (size_t)(q - s));
		e->name[q - s] = 0;
		e->nparams = 0;
		const char *end = strchr(q, ')');
		for (const char *r = strstr(q, ".param "); r && end && r < end; r = strstr(r + 1, ".param ")) {
			if (e->nparams == MAXPARAMS)
				return -1;
			e->sizes[e->nparams++] = paramSize(r + 7);
		}
	}
	return 0;
}

static void setOpt(unsigned n, int *opts, void **vals, int which, int sizeOpt, const char *msg) {
	char *buf = 0;
	size_t size = 0;
	for (unsigned i = 0; i < n; i++) {
		if (opts[i] == which)
			buf = vals[i];
		if (opts[i] == sizeOpt)
			size = (size_t)(uintptr_t)vals[i];
	}
	if (buf && size) {
		snprintf(buf, size, "%s", msg);
		for (unsigned i = 0; i < n; i++)
			if (opts[i] == sizeOpt)
				vals[i] = (void *)(uintptr_t)(strlen(buf) + 1);
	}
}

CUresult cuModuleLoadDataEx(CUmodule *mod, const void *image, unsigned n, int *opts, void **vals) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuModuleLoadDataEx options=%u", n);
	if (current < 0)
		RET(INVALID_CONTEXT);
	const char *ptx = image;
	if (strstr(ptx, "glmrun_fake_jit_error")) {
		setOpt(n, opts, vals, 5, 6, "ptxas application ptx input, line 1; error   : fake JIT failure (glmrun_fake_jit_error)");
		RET(INVALID_PTX);
	}
	struct module *m = malloc(sizeof *m);
	if (parse(ptx, m) != 0) {
		free(m);
		setOpt(n, opts, vals, 5, 6, "fake JIT: cannot parse the .entry list");
		RET(INVALID_PTX);
	}
	char info[128];
	snprintf(info, sizeof info, "fake JIT: %d entries", m->n);
	setOpt(n, opts, vals, 3, 4, info);
	*mod = m;
	RET(SUCCESS);
}
CUresult cuModuleUnload(CUmodule mod) {
	struct module *m = mod;
	if (!m)
		return INVALID_HANDLE;
	free(m->e);
	free(m);
	return SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction *f, CUmodule mod, const char *name) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	struct module *m = mod;
	if (!m)
		RET(INVALID_HANDLE);
	for (int i = 0; i < m->n; i++)
		if (!strcmp(m->e[i].name, name)) {
			*f = &m->e[i];
			pthread_mutex_unlock(&mu);
			return SUCCESS;
		}
	logf_("cuModuleGetFunction %s", name);
	RET(NOT_FOUND);
}

struct stream;
static CUresult runKernel(struct entry *e, const unsigned grid[3], const unsigned block[3], unsigned shmem,
                          unsigned long long *vals);
static CUresult recordKernel(struct stream *st, struct entry *e, const unsigned grid[3], const unsigned block[3],
                             unsigned shmem, unsigned long long *vals);

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, CUstream stream, void **params, void **extra) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	struct entry *e = f;
	if (!e)
		RET(INVALID_HANDLE);
	launches++;
	logf_("launch %s grid=%u,%u,%u block=%u,%u,%u shared=%u args=[", e->name, gx, gy, gz, bx, by, bz, shmem);
	unsigned long long vals[MAXPARAMS] = {0};
	for (int i = 0; i < e->nparams; i++) {
		if (params && params[i] && e->sizes[i] > 0)
			hostCopy(&vals[i], params[i], (size_t)e->sizes[i]);
		logf_("%s%d:%#llx", i ? " " : "", e->sizes[i], vals[i]);
	}
	logf_("]");
	if (!params || extra)
		RET(INVALID_VALUE);
	for (int i = 0; i < e->nparams; i++)
		if (!params[i])
			RET(INVALID_VALUE);
	if ((unsigned long long)bx * by * bz > 1024 || !gx || !gy || !gz || gy > 65535 || gz > 65535 || shmem > 48 << 10)
		RET(INVALID_VALUE);
	unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
	struct stream *st = stream;
	if (st && st->capturing)
		RET(recordKernel(st, e, grid, block, shmem, vals));
	RET(runKernel(e, grid, block, shmem, vals));
}

// runKernel runs one launch on the simulator (mu held).
static CUresult runKernel(struct entry *e, const unsigned grid[3], const unsigned block[3], unsigned shmem,
                          unsigned long long *vals) {
	void *copies[MAXPARAMS];
	for (int i = 0; i < e->nparams; i++)
		copies[i] = &vals[i];
	double t0 = now();
	int rc = glm_sim_launch(e->name, grid, block, shmem, copies, e->nparams, e->sizes, lastSimError,
	                        sizeof lastSimError);
	account(e->name, now() - t0);
	if (rc != 0) {
		logf_(" sim: %s", lastSimError);
		return rc == 1 ? NOT_FOUND : rc == 2 ? INVALID_VALUE : LAUNCH_FAILED;
	}
	return SUCCESS;
}

// ---- stream capture and graphs ----
struct node {
	int copy; // a host-to-device copy, else a kernel
	struct entry *e;
	unsigned grid[3], block[3], shmem;
	unsigned long long vals[MAXPARAMS];
	CUdeviceptr dst;
	const void *src;
	size_t n;
};
struct graph {
	int n, cap;
	struct node *nodes;
};
typedef struct graph *CUgraph, *CUgraphExec;

// Pinned host memory (cuMemAllocHost): the only source a captured copy
// may read.
struct hostAlloc {
	char *p;
	size_t n;
	struct hostAlloc *next;
};
static struct hostAlloc *hostAllocs;

static struct node *addNode(struct stream *st) {
	struct graph *g = st->g;
	if (g->n == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 64;
		g->nodes = realloc(g->nodes, (size_t)g->cap * sizeof *g->nodes);
	}
	struct node *nd = &g->nodes[g->n++];
	memset(nd, 0, sizeof *nd);
	return nd;
}

static CUresult recordKernel(struct stream *st, struct entry *e, const unsigned grid[3], const unsigned block[3],
                             unsigned shmem, unsigned long long *vals) {
	struct node *nd = addNode(st);
	nd->e = e;
	memcpy(nd->grid, grid, sizeof nd->grid);
	memcpy(nd->block, block, sizeof nd->block);
	nd->shmem = shmem;
	memcpy(nd->vals, vals, sizeof nd->vals);
	return SUCCESS;
}

// pinned reports whether [p, p+n) is memory of cuMemAllocHost (mu held).
static int pinned(const void *p, size_t n) {
	for (struct hostAlloc *h = hostAllocs; h; h = h->next)
		if ((const char *)p >= h->p && (const char *)p + n <= h->p + h->n)
			return 1;
	return 0;
}

static CUresult recordCopy(struct stream *st, CUdeviceptr dst, const void *src, size_t n) {
	if (!pinned(src, n)) {
		st->invalid = 1;
		return CAPTURE_UNSUPPORTED;
	}
	struct node *nd = addNode(st);
	nd->copy = 1;
	nd->dst = dst;
	nd->src = src;
	nd->n = n;
	return SUCCESS;
}

static void freeGraph(struct graph *g) {
	if (g) {
		free(g->nodes);
		free(g);
	}
}

CUresult cuMemAllocHost_v2(void **pp, size_t n) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuMemAllocHost_v2 %zu", n);
	if (n == 0)
		RET(INVALID_VALUE);
	struct hostAlloc *h = malloc(sizeof *h);
	h->p = malloc(n);
	h->n = n;
	h->next = hostAllocs;
	hostAllocs = h;
	*pp = h->p;
	RET(SUCCESS);
}
CUresult cuMemFreeHost(void *p) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuMemFreeHost");
	for (struct hostAlloc **hp = &hostAllocs; *hp; hp = &(*hp)->next) {
		struct hostAlloc *h = *hp;
		if (h->p == p) {
			*hp = h->next;
			free(h->p);
			free(h);
			RET(SUCCESS);
		}
	}
	RET(INVALID_VALUE);
}

CUresult cuStreamBeginCapture_v2(CUstream s, int mode) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuStreamBeginCapture_v2 mode=%d", mode);
	struct stream *st = s;
	if (!st || mode < 0 || mode > 2)
		RET(INVALID_VALUE);
	if (st->capturing)
		RET(CAPTURE_UNSUPPORTED);
	st->capturing = 1;
	st->invalid = 0;
	st->g = calloc(1, sizeof *st->g);
	capturing[st->dev] += st->blocking;
	RET(SUCCESS);
}
CUresult cuStreamEndCapture(CUstream s, CUgraph *g) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	struct stream *st = s;
	logf_("cuStreamEndCapture");
	if (!st || !st->capturing)
		RET(INVALID_VALUE);
	st->capturing = 0;
	capturing[st->dev] -= st->blocking;
	if (getenv("FAKECUDA_CAPTURE_FAIL")) // a test's stand-in for a capture the driver refuses
		st->invalid = 1;
	if (st->invalid) {
		freeGraph(st->g);
		st->g = 0;
		*g = 0;
		RET(CAPTURE_INVALIDATED);
	}
	*g = st->g;
	st->g = 0;
	RET(SUCCESS);
}
CUresult cuGraphDestroy(CUgraph g) {
	freeGraph(g);
	return SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec *x, CUgraph g, unsigned long long flags) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuGraphInstantiateWithFlags %d nodes", g ? g->n : -1);
	if (!g)
		RET(INVALID_VALUE);
	struct graph *c = calloc(1, sizeof *c);
	c->n = c->cap = g->n;
	c->nodes = malloc((size_t)(g->n ? g->n : 1) * sizeof *c->nodes);
	memcpy(c->nodes, g->nodes, (size_t)g->n * sizeof *c->nodes);
	*x = c;
	RET(SUCCESS);
}
CUresult cuGraphExecDestroy(CUgraphExec x) {
	freeGraph(x);
	return SUCCESS;
}
// CUgraphExecUpdateResultInfo: the result, the node that failed and the
// node it came from.
struct updateInfo {
	int result;
	void *errorNode, *errorFromNode;
};
CUresult cuGraphExecUpdate_v2(CUgraphExec x, CUgraph g, struct updateInfo *info) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	logf_("cuGraphExecUpdate_v2");
	if (!x || !g || !info)
		RET(INVALID_VALUE);
	memset(info, 0, sizeof *info);
	int same = x->n == g->n;
	for (int i = 0; same && i < g->n; i++)
		same = x->nodes[i].copy == g->nodes[i].copy && x->nodes[i].e == g->nodes[i].e;
	if (!same) {
		info->result = 2; // CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED
		RET(GRAPH_UPDATE_FAILURE);
	}
	memcpy(x->nodes, g->nodes, (size_t)g->n * sizeof *g->nodes);
	RET(SUCCESS);
}
CUresult cuGraphLaunch(CUgraphExec x, CUstream s) {
	pthread_mutex_lock(&mu);
	CHECK_INIT();
	struct stream *st = s;
	logf_("cuGraphLaunch %d nodes", x ? x->n : -1);
	if (!x || !st)
		RET(INVALID_VALUE);
	if (st->capturing)
		RET(CAPTURE_UNSUPPORTED);
	graphLaunches++;
	for (int i = 0; i < x->n; i++) {
		struct node *nd = &x->nodes[i];
		if (nd->copy) {
			hostCopy((void *)(uintptr_t)nd->dst, nd->src, nd->n);
			h2dBytes += (long)nd->n;
			continue;
		}
		CUresult r = runKernel(nd->e, nd->grid, nd->block, nd->shmem, nd->vals);
		if (r != SUCCESS)
			RET(r);
	}
	RET(SUCCESS);
}
