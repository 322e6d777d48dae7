// fakenccl.c: a fake libnccl.so.2 for glmrun's tests, over the fake CUDA
// driver's device memory (host memory). Communicators come from
// ncclCommInitAll; collectives must be issued for every rank between
// ncclGroupStart and ncclGroupEnd (single-thread multi-GPU use, where a
// lone call for one of several ranks would hang a real NCCL: here it is
// ncclInvalidUsage), and run at ncclGroupEnd. The all-reduce sums in rank
// order, so its result is the host path's bit for bit (a real NCCL's
// rings add in another order). fake_nccl_ops counts the collectives run.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef int ncclResult_t;
enum { ncclSuccess = 0, ncclInvalidArgument = 4, ncclInvalidUsage = 5 };
enum { ncclFloat32 = 7, ncclSum = 0 };

struct clique {
	int n, live;
};
struct comm {
	int rank;
	struct clique *c;
};
struct op {
	int bcast, root;
	const float *send;
	float *recv;
	size_t count;
	struct comm *comm;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int depth;
static struct op pending[256];
static int npending;
static long ops;

long fake_nccl_ops(void) { return ops; }

const char *ncclGetErrorString(ncclResult_t r) {
	switch (r) {
	case ncclSuccess:
		return "no error";
	case ncclInvalidArgument:
		return "invalid argument";
	case ncclInvalidUsage:
		return "invalid usage";
	}
	return "unknown result code";
}

ncclResult_t ncclGetVersion(int *v) {
	*v = 22304;
	return ncclSuccess;
}

ncclResult_t ncclCommInitAll(struct comm **comms, int n, const int *devs) {
	if (n < 1 || !comms)
		return ncclInvalidArgument;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			if (devs && devs[i] == devs[j])
				return ncclInvalidUsage; // duplicate GPU
	struct clique *c = calloc(1, sizeof *c);
	c->n = c->live = n;
	for (int i = 0; i < n; i++) {
		comms[i] = calloc(1, sizeof **comms);
		comms[i]->rank = i;
		comms[i]->c = c;
	}
	return ncclSuccess;
}

ncclResult_t ncclCommDestroy(struct comm *c) {
	if (!c)
		return ncclInvalidArgument;
	if (--c->c->live == 0)
		free(c->c);
	free(c);
	return ncclSuccess;
}

static ncclResult_t push(int bcast, const void *send, void *recv, size_t count, int dtype, int arg, struct comm *comm) {
	if (dtype != ncclFloat32 || !comm || !send || !recv)
		return ncclInvalidArgument;
	if (!bcast && arg != ncclSum)
		return ncclInvalidArgument;
	pthread_mutex_lock(&mu);
	if (depth == 0 && comm->c->n > 1) {
		pthread_mutex_unlock(&mu);
		return ncclInvalidUsage;
	}
	if (npending == 256) {
		pthread_mutex_unlock(&mu);
		return ncclInvalidUsage;
	}
	pending[npending++] = (struct op){bcast, arg, send, recv, count, comm};
	pthread_mutex_unlock(&mu);
	return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op, struct comm *comm,
                           void *stream) {
	return push(0, send, recv, count, dtype, op, comm);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, int dtype, int root, struct comm *comm,
                           void *stream) {
	if (root < 0 || (comm && root >= comm->c->n))
		return ncclInvalidArgument;
	return push(1, send, recv, count, dtype, root, comm);
}

ncclResult_t ncclGroupStart(void) {
	pthread_mutex_lock(&mu);
	depth++;
	pthread_mutex_unlock(&mu);
	return ncclSuccess;
}

// run runs the pending collectives of one clique: one op per rank, of
// one kind and count.
static ncclResult_t run(struct op *o, int n) {
	struct op *byRank[64] = {0};
	if (n != o[0].comm->c->n || n > 64)
		return ncclInvalidUsage;
	for (int i = 0; i < n; i++) {
		if (o[i].bcast != o[0].bcast || o[i].count != o[0].count || o[i].root != o[0].root || byRank[o[i].comm->rank])
			return ncclInvalidUsage;
		byRank[o[i].comm->rank] = &o[i];
	}
	size_t count = o[0].count;
	float *sum = malloc((count ? count : 1) * sizeof *sum);
	if (o[0].bcast) {
		memcpy(sum, byRank[o[0].root]->send, count * sizeof *sum);
	} else {
		memcpy(sum, byRank[0]->send, count * sizeof *sum);
		for (int r = 1; r < n; r++)
			for (size_t j = 0; j < count; j++)
				sum[j] += byRank[r]->send[j];
	}
	for (int r = 0; r < n; r++)
		memcpy(byRank[r]->recv, sum, count * sizeof *sum);
	free(sum);
	ops++;
	return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
	pthread_mutex_lock(&mu);
	if (depth == 0) {
		pthread_mutex_unlock(&mu);
		return ncclInvalidUsage;
	}
	ncclResult_t r = ncclSuccess;
	if (--depth == 0) {
		// The group's ops, clique by clique in issue order.
		int done = 0;
		while (done < npending && r == ncclSuccess) {
			struct clique *c = pending[done].comm->c;
			int k = done;
			while (k < npending && pending[k].comm->c == c)
				k++;
			r = run(&pending[done], k - done);
			done = k;
		}
		npending = 0;
	}
	pthread_mutex_unlock(&mu);
	return r;
}
