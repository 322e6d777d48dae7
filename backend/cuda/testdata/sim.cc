// sim.cc: runs glmrun's CUDA kernels on the CPU for the fake driver
// (fakecuda.c). Built with -DGLM_CPU_SIM, it compiles kernels/all.cu as
// plain C++ and executes a launch block by block; inside a block every CUDA
// thread is a cooperative fiber (ucontext) that runs until it reaches
// __syncthreads() or a warp shuffle, so barriers and shuffles behave as on
// the GPU and the result does not depend on OS scheduling. With
// FAKECUDA_THREADS=1 every CUDA thread is a pthread instead, barriers are
// pthread barriers, and a ThreadSanitizer build (the race test) checks the
// kernels' shared-memory discipline. It checks kernel logic, not code
// generation.
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "simreg.h"

// The registry is filled by static constructors on the thread that loads
// the library and read by launches on others; the mutex makes that
// ordering visible to ThreadSanitizer (the Go code's own synchronization
// is not).
static std::mutex registryMu;

static std::map<std::string, glm_sim_kernel> &registry() {
	static std::map<std::string, glm_sim_kernel> r;
	return r;
}

void glm_sim_register(const glm_sim_kernel &k) {
	std::lock_guard<std::mutex> l(registryMu);
	registry()[k.name] = k;
}

static const glm_sim_kernel *findKernel(const char *name) {
	std::lock_guard<std::mutex> l(registryMu);
	auto it = registry().find(name);
	return it == registry().end() ? nullptr : &it->second;
}

#define GLM_CPU_SIM 1
#include "../kernels/all.cu"

__thread glm_sim_coords glm_sim_now;

namespace {

enum State { READY, BLOCK_WAIT, WARP_WAIT, DONE };

const size_t stackSize = 256 << 10;

// A fiber switch saves the callee-saved registers on the current stack
// and swaps stack pointers: on x86-64 a few instructions (swapcontext
// would make two system calls per switch); elsewhere ucontext.
#if defined(__x86_64__)
extern "C" void glm_sim_switch(void **save, void *to);
asm(".text\n"
    ".globl glm_sim_switch\n"
    ".type glm_sim_switch,@function\n"
    "glm_sim_switch:\n"
    "\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
    "\tmovq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n"
    "\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
    "\tret\n"
    ".size glm_sim_switch, .-glm_sim_switch\n");
struct Context {
	void *sp = nullptr;
};
#else
struct Context {
	ucontext_t uc;
};
#endif

struct Fiber {
	Context ctx;
	char *stack = nullptr;
	State state = DONE;
};

struct Sim {
	Context main;
	std::vector<Fiber> fibers;
	std::vector<float> slots; // one shuffle slot per thread
	std::vector<float> sums;  // warp_sum results, one per thread
	std::vector<char> summed; // per warp: sums are computed
	std::vector<int> warpLive, warpWaiting;
	int live = 0, blockWaiting = 0, nthreads = 0;
	int cur = 0;
	unsigned bx = 1, by = 1;
	const glm_sim_kernel *kernel = nullptr;
	void **args = nullptr;
	void *dyn = nullptr;
};

Sim sim;

void setCoords(int tid) {
	glm_sim_now.tid = {tid % sim.bx, (tid / sim.bx) % sim.by, tid / (sim.bx * sim.by)};
}

// switchTo saves the running context in from and resumes to.
void switchTo(Context &from, Context &to) {
#if defined(__x86_64__)
	glm_sim_switch(&from.sp, to.sp);
#else
	swapcontext(&from.uc, &to.uc);
#endif
}

void fiberMain() {
	sim.kernel->run(sim.args);
	sim.fibers[sim.cur].state = DONE;
	sim.live--;
	sim.warpLive[sim.cur / 32]--;
	Context dead;
	switchTo(dead, sim.main); // never resumed
}

// startFiber prepares f to run fiberMain on its own stack.
void startFiber(Fiber &f) {
#if defined(__x86_64__)
	// The stack as glm_sim_switch leaves it: six saved registers, then the
	// return address fiberMain, then a dummy return address for
	// fiberMain's own frame (so that its entry sees rsp ≡ 8 mod 16).
	void **top = (void **)(((unsigned long)(f.stack + stackSize)) & ~15ul);
	*--top = nullptr;
	*--top = (void *)fiberMain;
	for (int i = 0; i < 6; i++)
		*--top = nullptr;
	f.ctx.sp = top;
#else
	getcontext(&f.ctx.uc);
	f.ctx.uc.uc_stack.ss_sp = f.stack;
	f.ctx.uc.uc_stack.ss_size = stackSize;
	f.ctx.uc.uc_link = nullptr;
	makecontext(&f.ctx.uc, fiberMain, 0);
#endif
}

void yieldTo(State s) {
	Fiber &f = sim.fibers[sim.cur];
	f.state = s;
	if (s == WARP_WAIT)
		sim.warpWaiting[sim.cur / 32]++;
	else if (s == BLOCK_WAIT)
		sim.blockWaiting++;
	switchTo(f.ctx, sim.main);
}

// runBlock runs every thread of the current block to completion; it
// returns false on a deadlock (threads waiting at different barriers).
bool runBlock(int n, char *err, size_t errlen) {
	int warps = (n + 31) / 32;
	sim.live = n;
	sim.blockWaiting = 0;
	sim.warpLive.assign(warps, 0);
	sim.warpWaiting.assign(warps, 0);
	for (int i = 0; i < n; i++) {
		Fiber &f = sim.fibers[i];
		if (!f.stack)
			f.stack = (char *)malloc(stackSize);
		startFiber(f);
		f.state = READY;
		sim.warpLive[i / 32]++;
	}
	for (;;) {
		for (int i = 0; i < n; i++) {
			if (sim.fibers[i].state != READY)
				continue;
			sim.cur = i;
			setCoords(i);
			switchTo(sim.main, sim.fibers[i].ctx);
		}
		// Nobody can run: release complete warp barriers, else the block barrier.
		if (sim.live == 0)
			return true;
		bool released = false;
		for (int w = 0; w < warps; w++) {
			if (sim.warpWaiting[w] == 0 || sim.warpWaiting[w] != sim.warpLive[w])
				continue;
			for (int i = 32 * w; i < n && i < 32 * w + 32; i++)
				if (sim.fibers[i].state == WARP_WAIT)
					sim.fibers[i].state = READY;
			sim.warpWaiting[w] = 0;
			released = true;
		}
		if (released)
			continue;
		if (sim.blockWaiting == sim.live) {
			for (int i = 0; i < n; i++)
				if (sim.fibers[i].state == BLOCK_WAIT)
					sim.fibers[i].state = READY;
			sim.blockWaiting = 0;
			continue;
		}
		snprintf(err, errlen, "%s: deadlock: threads wait at different barriers", sim.kernel->name);
		return false;
	}
}


// ---- pthread mode (FAKECUDA_THREADS=1) ----

struct Threads {
	bool on = false;
	pthread_barrier_t block;
	std::vector<pthread_barrier_t> warp;
	glm_sim_coords coords; // blockIdx, blockDim, gridDim of the running block
};
Threads pt;
__thread int ptTid;

// ptMain runs one CUDA thread through every block of the launch; a block
// barrier separates consecutive blocks, which reuse the shared memory.
void *ptMain(void *arg) {
	int tid = (int)(long)arg;
	ptTid = tid;
	glm_sim_now = pt.coords;
	glm_sim_now.tid = {tid % sim.bx, (tid / sim.bx) % sim.by, tid / (sim.bx * sim.by)};
	const glm_dim3 g = pt.coords.gdim;
	for (unsigned z = 0; z < g.z; z++)
		for (unsigned y = 0; y < g.y; y++)
			for (unsigned x = 0; x < g.x; x++) {
				glm_sim_now.bid = {x, y, z};
				sim.kernel->run(sim.args);
				pthread_barrier_wait(&pt.block);
			}
	return nullptr;
}

// runGridThreads runs the whole grid with n pthreads.
bool runGridThreads(int n, char *err, size_t errlen) {
	int warps = (n + 31) / 32;
	pthread_barrier_init(&pt.block, nullptr, (unsigned)n);
	pt.warp.resize(warps);
	for (int w = 0; w < warps; w++)
		pthread_barrier_init(&pt.warp[w], nullptr, (unsigned)(n - 32 * w < 32 ? n - 32 * w : 32));
	pt.coords = glm_sim_now;
	std::vector<pthread_t> th(n);
	bool ok = true;
	int started = 0;
	for (; started < n; started++)
		if (pthread_create(&th[started], nullptr, ptMain, (void *)(long)started) != 0) {
			ok = false;
			break;
		}
	if (!ok) {
		// The started threads wait at the first block barrier forever:
		// give up on the process rather than hang.
		snprintf(err, errlen, "%s: pthread_create failed", sim.kernel->name);
		abort();
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], nullptr);
	pthread_barrier_destroy(&pt.block);
	for (int w = 0; w < warps; w++)
		pthread_barrier_destroy(&pt.warp[w]);
	return ok;
}

int curThread() { return pt.on ? ptTid : sim.cur; }

void warpWait(int i) {
	if (pt.on)
		pthread_barrier_wait(&pt.warp[i / 32]);
	else
		yieldTo(WARP_WAIT);
}

} // namespace

extern "C" void glm_sim_syncthreads(void) {
	if (pt.on)
		pthread_barrier_wait(&pt.block);
	else
		yieldTo(BLOCK_WAIT);
}

extern "C" float glm_sim_shfl_xor(float v, int mask) {
	int i = curThread();
	sim.slots[8 * i] = v;
	warpWait(i);
	int j = (i & ~31) | ((i & 31) ^ (mask & 31));
	float r = sim.slots[8 * j];
	warpWait(i);
	return r;
}

// glm_sim_warp_sum_n is warp_sum over k ≤ 8 values per lane in one
// exchange: every lane publishes its values; the first lane to resume
// computes the butterfly of the five shfl_xor rounds for the whole warp,
// adding in the GPU's order.
extern "C" void glm_sim_warp_sum_n(float *v, int k) {
	int i = curThread(), w = i / 32, base = 32 * w;
	for (int j = 0; j < k; j++)
		sim.slots[8 * i + j] = v[j];
	warpWait(i);
	// With pthreads every lane computes the butterfly itself (no shared
	// flag to race on); fibers share the first lane's result.
	if (pt.on || !sim.summed[w]) {
		for (int j = 0; j < k; j++) {
			float x[32], y[32];
			for (int l = 0; l < 32; l++)
				x[l] = base + l < sim.nthreads ? sim.slots[8 * (base + l) + j] : 0.0f;
			for (int m = 16; m > 0; m >>= 1) {
				for (int l = 0; l < 32; l++)
					y[l] = x[l] + x[l ^ m];
				for (int l = 0; l < 32; l++)
					x[l] = y[l];
			}
			if (pt.on) {
				v[j] = x[i - base];
				continue;
			}
			for (int l = 0; l < 32 && base + l < sim.nthreads; l++)
				sim.sums[8 * (base + l) + j] = x[l];
		}
		if (!pt.on)
			sim.summed[w] = 1;
	}
	if (!pt.on)
		for (int j = 0; j < k; j++)
			v[j] = sim.sums[8 * i + j];
	warpWait(i);
	if (!pt.on)
		sim.summed[w] = 0;
}

extern "C" void *glm_sim_dynamic_shared(void) { return sim.dyn; }

// glm_sim_launch runs kernel name over the grid. sizes are the parameter
// sizes of the loaded PTX entry. It returns 0, or 1 (unknown kernel), 2
// (parameter mismatch) or 3 (bad configuration or deadlock) with a message
// in err.
extern "C" int glm_sim_launch(const char *name, const unsigned grid[3], const unsigned block[3], unsigned shmem,
                              void **params, int nparams, const int *sizes, char *err, size_t errlen) {
	const glm_sim_kernel *kp = findKernel(name);
	if (!kp) {
		snprintf(err, errlen, "%s: no simulated kernel of that name", name);
		return 1;
	}
	const glm_sim_kernel &k = *kp;
	if (k.nparams != nparams) {
		snprintf(err, errlen, "%s: PTX has %d parameters, the source %d", name, nparams, k.nparams);
		return 2;
	}
	for (int i = 0; i < nparams; i++) {
		if (k.sizes[i] != sizes[i]) {
			snprintf(err, errlen, "%s: parameter %d is %d bytes in the PTX, %d in the source", name, i, sizes[i],
			         k.sizes[i]);
			return 2;
		}
	}
	unsigned n = block[0] * block[1] * block[2];
	if (n == 0 || n > 1024 || grid[0] == 0 || grid[1] == 0 || grid[2] == 0) {
		snprintf(err, errlen, "%s: bad launch configuration", name);
		return 3;
	}
	const char *mode = getenv("FAKECUDA_THREADS");
	pt.on = mode && mode[0] == '1';
	if (sim.fibers.size() < n)
		sim.fibers.resize(n);
	sim.slots.assign(8 * n, 0);
	sim.sums.assign(8 * sim.fibers.size(), 0);
	sim.nthreads = (int)n;
	sim.summed.assign((n + 31) / 32, 0);
	sim.kernel = &k;
	sim.args = params;
	sim.bx = block[0];
	sim.by = block[1];
	std::vector<char> dyn(shmem ? shmem : 1);
	sim.dyn = dyn.data();
	glm_sim_now.bdim = {block[0], block[1], block[2]};
	glm_sim_now.gdim = {grid[0], grid[1], grid[2]};
	if (pt.on)
		return runGridThreads((int)n, err, errlen) ? 0 : 3;
	for (unsigned z = 0; z < grid[2]; z++)
		for (unsigned y = 0; y < grid[1]; y++)
			for (unsigned x = 0; x < grid[0]; x++) {
				glm_sim_now.bid = {x, y, z};
				if (!runBlock((int)n, err, errlen))
					return 3;
			}
	return 0;
}

// glm_sim_racy is deliberately wrong (a thread reads its neighbour's
// shared slot without a barrier): the race test checks that
// ThreadSanitizer reports it. It is not in the PTX.
KERNEL glm_sim_racy(float *out) {
	SHARED float s[1024];
	s[threadIdx.x] = (float)threadIdx.x;
	out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}
GLM_REGISTER(glm_sim_racy)
