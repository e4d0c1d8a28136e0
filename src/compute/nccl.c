// NCCL through dlopen (nccl.h). The few declarations below are NCCL's C ABI
// (nccl.h of NCCL 2.x): the unique id is 128 bytes passed by value, results
// and data types are ints, communicators and streams are pointers.
#include "compute/nccl.h"
#include "base/comm.h"

#include <dlfcn.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } nccl_id;
typedef int (*get_id_fn)(nccl_id *);
typedef int (*init_rank_fn)(void **comm, int nranks, nccl_id id, int rank);
typedef int (*all_reduce_fn)(const void *send, void *recv, size_t count, int dtype, int op, void *comm, void *stream);
typedef int (*all_gather_fn)(const void *send, void *recv, size_t count, int dtype, void *comm, void *stream);
typedef int (*bcast_fn)(const void *send, void *recv, size_t count, int dtype, int root, void *comm, void *stream);
typedef int (*p2p_fn)(void *buf, size_t count, int dtype, int peer, void *comm, void *stream); // (ncclSend's buffer is const)
typedef int (*group_fn)(void);
typedef int (*destroy_fn)(void *comm);
typedef const char *(*err_fn)(int);
typedef int (*version_fn)(int *);
enum { NCCL_FLOAT32 = 7, NCCL_SUM = 0 };

static struct {
    void *lib;
    get_id_fn get_id;
    init_rank_fn init_rank;
    all_reduce_fn all_reduce;
    all_gather_fn all_gather;
    bcast_fn bcast;
    p2p_fn send, recv;
    group_fn group_start, group_end;
    destroy_fn destroy;
    err_fn err;
    version_fn version;
} L;

struct nccl {
    void *comm;
};

static _Thread_local char why[256];
static char version[32];

const char *nccl_why(void) { return why; }
const char *nccl_version(void) { return version; }

// libnccl.so.2 as the loader finds it, else a Python environment's
// nvidia-nccl wheel (as PyTorch installs it); INFER_NCCL_LIB first.
static void *open_lib(void) {
    const char *e = getenv("INFER_NCCL_LIB");
    if (e && *e) return dlopen(e, RTLD_NOW | RTLD_LOCAL);
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    const char *pats[] = {"/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
                          "/usr/local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
                          "/usr/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
                          "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2",
                          "/opt/conda/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2"};
    for (size_t i = 0; i < sizeof pats / sizeof *pats && !h; i++) {
        glob_t g;
        if (glob(pats[i], 0, NULL, &g) == 0 && g.gl_pathc) h = dlopen(g.gl_pathv[0], RTLD_NOW | RTLD_LOCAL);
        globfree(&g);
    }
    return h;
}

static int load(void) {
    if (L.lib) return 0;
    void *h = open_lib();
    if (!h) {
        snprintf(why, sizeof why, "no NCCL library (libnccl.so.2; INFER_NCCL_LIB names one): %s", dlerror());
        return -1;
    }
    L.get_id = (get_id_fn)dlsym(h, "ncclGetUniqueId");
    L.init_rank = (init_rank_fn)dlsym(h, "ncclCommInitRank");
    L.all_reduce = (all_reduce_fn)dlsym(h, "ncclAllReduce");
    L.all_gather = (all_gather_fn)dlsym(h, "ncclAllGather");
    L.bcast = (bcast_fn)dlsym(h, "ncclBroadcast");
    L.send = (p2p_fn)dlsym(h, "ncclSend");
    L.recv = (p2p_fn)dlsym(h, "ncclRecv");
    L.group_start = (group_fn)dlsym(h, "ncclGroupStart");
    L.group_end = (group_fn)dlsym(h, "ncclGroupEnd");
    L.destroy = (destroy_fn)dlsym(h, "ncclCommDestroy");
    L.err = (err_fn)dlsym(h, "ncclGetErrorString");
    L.version = (version_fn)dlsym(h, "ncclGetVersion");
    if (!L.get_id || !L.init_rank || !L.all_reduce || !L.all_gather || !L.bcast || !L.send || !L.recv || !L.group_start || !L.group_end || !L.destroy || !L.err || !L.version) {
        snprintf(why, sizeof why, "the NCCL library lacks ncclCommInitRank, ncclAllReduce or another call infer makes");
        dlclose(h);
        memset(&L, 0, sizeof L);
        return -1;
    }
    int v = 0;
    L.version(&v); // (2.19.3 is 21903)
    snprintf(version, sizeof version, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    L.lib = h;
    return 0;
}

nccl *nccl_open(struct comm *host) {
    why[0] = 0;
    // every rank says whether it has the library; NCCL only where all do
    float ok = load() == 0 ? 1.0f : 0.0f;
    char mine[256];
    snprintf(mine, sizeof mine, "%s", why);
    if (comm_allreduce(host, &ok, 1)) {
        snprintf(why, sizeof why, "%s", comm_error(host));
        return NULL;
    }
    if (ok < (float)comm_world(host)) {
        snprintf(why, sizeof why, "%s", mine[0] ? mine : "another rank has no NCCL library");
        return NULL;
    }
    nccl_id id;
    memset(&id, 0, sizeof id);
    int r = comm_rank(host) == 0 ? L.get_id(&id) : 0;
    float good = r == 0 ? 1.0f : 0.0f;
    if (comm_allreduce(host, &good, 1) || good < (float)comm_world(host) || comm_bcast(host, &id, sizeof id, 0)) {
        snprintf(why, sizeof why, "ncclGetUniqueId: %s", r ? L.err(r) : "failed on rank 0");
        return NULL;
    }
    nccl *n = calloc(1, sizeof *n);
    if (!n) {
        snprintf(why, sizeof why, "out of memory");
        return NULL;
    }
    // NVLink multicast: never (it can take a shared host's GPUs out of service;
    // DESIGN.md); NCCL's switch, and those of the libraries that may share the process
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
    setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
    r = L.init_rank(&n->comm, comm_world(host), id, comm_rank(host));
    // (every rank learns whether every rank's init worked: one that failed
    // would leave the others' collectives waiting)
    good = r == 0 ? 1.0f : 0.0f;
    if (comm_allreduce(host, &good, 1) || good < (float)comm_world(host)) {
        snprintf(why, sizeof why, "ncclCommInitRank: %s", r ? L.err(r) : "failed on another rank");
        if (!r) L.destroy(n->comm);
        free(n);
        return NULL;
    }
    return n;
}

void nccl_close(nccl *n) {
    if (!n) return;
    if (n->comm) L.destroy(n->comm);
    free(n);
}

int nccl_allreduce(nccl *n, float *x, size_t count, void *stream) {
    int r = L.all_reduce(x, x, count, NCCL_FLOAT32, NCCL_SUM, n->comm, stream);
    if (r) snprintf(why, sizeof why, "ncclAllReduce: %s", L.err(r));
    return r ? -1 : 0;
}

int nccl_allgather(nccl *n, const float *send, float *recv, size_t count, void *stream) {
    int r = L.all_gather(send, recv, count, NCCL_FLOAT32, n->comm, stream);
    if (r) snprintf(why, sizeof why, "ncclAllGather: %s", L.err(r));
    return r ? -1 : 0;
}

int nccl_bcast(nccl *n, float *x, size_t count, int root, void *stream) {
    int r = L.bcast(x, x, count, NCCL_FLOAT32, root, n->comm, stream);
    if (r) snprintf(why, sizeof why, "ncclBroadcast: %s", L.err(r));
    return r ? -1 : 0;
}

int nccl_sendrecv(nccl *n, const float *send, size_t ns, int to, float *recv, size_t nr, int from, void *stream) {
    int r = L.group_start();
    if (!r && send) r = L.send((void *)send, ns, NCCL_FLOAT32, to, n->comm, stream);
    if (!r && recv) r = L.recv(recv, nr, NCCL_FLOAT32, from, n->comm, stream);
    int e = L.group_end(); // (a group begun is ended, whatever failed in it)
    r = r ? r : e;
    if (r) snprintf(why, sizeof why, "ncclSend/ncclRecv: %s", L.err(r));
    return r ? -1 : 0;
}
