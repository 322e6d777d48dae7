// sim.cc: runs glmrun's CUDA kernels on the CPU for the fake driver
// (fakecuda.c). Built with -DGLM_CPU_SIM, it compiles kernels/all.cu as
// plain C++ and executes a launch block by block; inside a block every CUDA
// thread is a cooperative fiber (ucontext) that runs until it reaches
// __syncthreads() or a warp shuffle, so barriers and shuffles behave as on
// the GPU and the result does not depend on OS scheduling. It checks
// kernel logic, not code generation.
#include <map>
#include <string>
#include <vector>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "simreg.h"

static std::map<std::string, glm_sim_kernel> &registry() {
	static std::map<std::string, glm_sim_kernel> r;
	return r;
}

void glm_sim_register(const glm_sim_kernel &k) { registry()[k.name] = k; }

#define GLM_CPU_SIM 1
#include "../kernels/all.cu"

glm_sim_coords glm_sim_now;

namespace {

enum State { READY, BLOCK_WAIT, WARP_WAIT, DONE };

const size_t stackSize = 256 << 10;

struct Fiber {
	ucontext_t ctx;
	char *stack = nullptr;
	State state = DONE;
};

struct Sim {
	ucontext_t main;
	std::vector<Fiber> fibers;
	std::vector<float> slots; // one shuffle slot per thread
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

void fiberMain() {
	sim.kernel->run(sim.args);
	sim.fibers[sim.cur].state = DONE;
	// returning resumes sim.main through uc_link
}

void yieldTo(State s) {
	Fiber &f = sim.fibers[sim.cur];
	f.state = s;
	swapcontext(&f.ctx, &sim.main);
}

// runBlock runs every thread of the current block to completion; it
// returns false on a deadlock (threads waiting at different barriers).
bool runBlock(int n, char *err, size_t errlen) {
	for (int i = 0; i < n; i++) {
		Fiber &f = sim.fibers[i];
		if (!f.stack)
			f.stack = (char *)malloc(stackSize);
		getcontext(&f.ctx);
		f.ctx.uc_stack.ss_sp = f.stack;
		f.ctx.uc_stack.ss_size = stackSize;
		f.ctx.uc_link = &sim.main;
		makecontext(&f.ctx, fiberMain, 0);
		f.state = READY;
	}
	int warps = (n + 31) / 32;
	for (;;) {
		bool ran = false;
		for (int i = 0; i < n; i++) {
			if (sim.fibers[i].state != READY)
				continue;
			sim.cur = i;
			setCoords(i);
			swapcontext(&sim.main, &sim.fibers[i].ctx);
			ran = true;
		}
		if (ran)
			continue;
		// Nobody can run: release complete warp barriers, else the block barrier.
		bool released = false, live = false, allBlock = true;
		for (int w = 0; w < warps; w++) {
			bool any = false, all = true;
			for (int i = 32 * w; i < n && i < 32 * w + 32; i++) {
				State s = sim.fibers[i].state;
				if (s == DONE)
					continue;
				live = true;
				if (s == WARP_WAIT)
					any = true;
				else
					all = false;
				if (s != BLOCK_WAIT)
					allBlock = false;
			}
			if (any && all) {
				for (int i = 32 * w; i < n && i < 32 * w + 32; i++)
					if (sim.fibers[i].state == WARP_WAIT)
						sim.fibers[i].state = READY;
				released = true;
			}
		}
		if (!live)
			return true;
		if (released)
			continue;
		if (allBlock) {
			for (int i = 0; i < n; i++)
				if (sim.fibers[i].state == BLOCK_WAIT)
					sim.fibers[i].state = READY;
			continue;
		}
		snprintf(err, errlen, "%s: deadlock: threads wait at different barriers", sim.kernel->name);
		return false;
	}
}

} // namespace

extern "C" void glm_sim_syncthreads(void) { yieldTo(BLOCK_WAIT); }

extern "C" float glm_sim_shfl_xor(float v, int mask) {
	int i = sim.cur;
	sim.slots[i] = v;
	yieldTo(WARP_WAIT);
	int j = (i & ~31) | ((i & 31) ^ (mask & 31));
	float r = sim.slots[j];
	yieldTo(WARP_WAIT);
	return r;
}

extern "C" void *glm_sim_dynamic_shared(void) { return sim.dyn; }

// glm_sim_launch runs kernel name over the grid. sizes are the parameter
// sizes of the loaded PTX entry. It returns 0, or 1 (unknown kernel), 2
// (parameter mismatch) or 3 (bad configuration or deadlock) with a message
// in err.
extern "C" int glm_sim_launch(const char *name, const unsigned grid[3], const unsigned block[3], unsigned shmem,
                              void **params, int nparams, const int *sizes, char *err, size_t errlen) {
	auto it = registry().find(name);
	if (it == registry().end()) {
		snprintf(err, errlen, "%s: no simulated kernel of that name", name);
		return 1;
	}
	const glm_sim_kernel &k = it->second;
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
	if (sim.fibers.size() < n)
		sim.fibers.resize(n);
	sim.slots.assign(n, 0);
	sim.kernel = &k;
	sim.args = params;
	sim.bx = block[0];
	sim.by = block[1];
	std::vector<char> dyn(shmem ? shmem : 1);
	sim.dyn = dyn.data();
	glm_sim_now.bdim = {block[0], block[1], block[2]};
	glm_sim_now.gdim = {grid[0], grid[1], grid[2]};
	for (unsigned z = 0; z < grid[2]; z++)
		for (unsigned y = 0; y < grid[1]; y++)
			for (unsigned x = 0; x < grid[0]; x++) {
				glm_sim_now.bid = {x, y, z};
				if (!runBlock((int)n, err, errlen))
					return 3;
			}
	return 0;
}
