// simreg.h: how the CPU simulation (GLM_CPU_SIM) registers kernels:
// GLM_REGISTER(name) in a .cu file records the kernel's name, a thunk that
// calls it with CUDA-style kernelParams (an array of pointers to the
// argument values) and its parameter sizes, which the fake driver checks
// against the loaded PTX on every launch.
#ifndef GLM_SIMREG_H
#define GLM_SIMREG_H
#include <stddef.h>
#include <utility>

#define GLM_SIM_MAX_PARAMS 32

typedef void (*glm_sim_thunk)(void **args);

struct glm_sim_kernel {
	const char *name;
	glm_sim_thunk run;
	int nparams;
	int sizes[GLM_SIM_MAX_PARAMS];
};

void glm_sim_register(const glm_sim_kernel &k);

struct glm_sim_registrar {
	glm_sim_registrar(const char *name, glm_sim_kernel k) {
		k.name = name;
		glm_sim_register(k);
	}
};

template <auto K> struct glm_sim_entry;
template <class... A, void (*K)(A...)> struct glm_sim_entry<K> {
	template <size_t... I> static void call(void **a, std::index_sequence<I...>) { K(*(A *)a[I]...); }
	static void run(void **a) { call(a, std::index_sequence_for<A...>{}); }
	static glm_sim_kernel make() {
		static_assert(sizeof...(A) <= GLM_SIM_MAX_PARAMS, "too many kernel parameters");
		glm_sim_kernel k{};
		k.run = run;
		k.nparams = (int)sizeof...(A);
		int s[] = {(int)sizeof(A)..., 0};
		for (int i = 0; i < k.nparams; i++)
			k.sizes[i] = s[i];
		return k;
	}
};
#endif
