// A context's KV cache as device addresses reserved whole and backed as the
// sequence grows (the CUDA driver's virtual memory management): cuda_vm_reserve
// takes a range of addresses and no memory; cuda_vm_commit backs the chunks
// (the driver's granularity, 2 MiB on the GPUs we know) that cover a part of
// it, each zeroed as it comes; cuda_vm_trim gives back the chunks past a
// length; cuda_vm_free all of it. cuda_vm_share maps another range's chunks
// (a cached prefix) in place of a range's own, the memory counted once, and
// cuda_vm_private gives a range chunks of its own again (copy on write: the
// caller makes a shared part private before it writes there). The kernels see
// one contiguous cache, as from cudaMalloc. The driver's functions come through the runtime's entry
// points (no link with libcuda). A commit refuses to leave less than
// INFER_CUDA_VM_SPARE bytes of the GPU free (default 1 GiB: the scratch, cuBLAS
// and the weights' copies grow too), so a full GPU says so before a pass
// fails on it.
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "compute/cuda/common.cuh"

typedef CUresult (*pf_gran)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
typedef CUresult (*pf_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
typedef CUresult (*pf_release)(CUmemGenericAllocationHandle);
typedef CUresult (*pf_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*pf_afree)(CUdeviceptr, size_t);
typedef CUresult (*pf_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*pf_unmap)(CUdeviceptr, size_t);
typedef CUresult (*pf_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);

static struct {
    pf_gran gran;
    pf_create create;
    pf_release release;
    pf_reserve reserve;
    pf_afree afree;
    pf_map map;
    pf_unmap unmap;
    pf_access access;
    int ok; // 1: found; -1: not
    size_t spare;
} g_vm;

// A chunk of memory, mapped in `refs` ranges
struct vm_chunk {
    CUmemGenericAllocationHandle h;
    int refs;
};

// A reserved range: its chunks (NULL: not backed)
struct vm_region {
    uintptr_t va;
    size_t size, gran;
    int ordinal, n;
    struct vm_chunk **c;
};
static struct vm_region *g_reg;
static int g_nreg;
static size_t g_mapped; // bytes backed, every region (a shared chunk once)
static uintptr_t g_stage[64]; // a chunk's addresses a device, where cuda_vm_private copies a shared chunk
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void *entry(const char *name) {
    void *f = NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) != cudaSuccess || q != cudaDriverEntryPointSuccess) return NULL;
    return f;
}

static void vm_init(void) {
    g_vm.gran = (pf_gran)entry("cuMemGetAllocationGranularity"), g_vm.create = (pf_create)entry("cuMemCreate");
    g_vm.release = (pf_release)entry("cuMemRelease"), g_vm.reserve = (pf_reserve)entry("cuMemAddressReserve");
    g_vm.afree = (pf_afree)entry("cuMemAddressFree"), g_vm.map = (pf_map)entry("cuMemMap");
    g_vm.unmap = (pf_unmap)entry("cuMemUnmap"), g_vm.access = (pf_access)entry("cuMemSetAccess");
    g_vm.ok = g_vm.gran && g_vm.create && g_vm.release && g_vm.reserve && g_vm.afree && g_vm.map && g_vm.unmap && g_vm.access ? 1 : -1;
    const char *e = getenv("INFER_CUDA_VM_SPARE");
    g_vm.spare = e && *e ? (size_t)strtoull(e, NULL, 10) : (size_t)1 << 30;
    cudaGetLastError(); // (a failed lookup leaves nothing for the next launch's check)
}

static CUmemAllocationProp vm_prop(int ordinal) {
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = ordinal;
    return p;
}

extern "C" HIDDEN size_t cuda_vm_granularity(cuda_dev *d) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, vm_init);
    if (g_vm.ok != 1) return 0;
    size_t gran = 0;
    const CUmemAllocationProp p = vm_prop(d->ordinal);
    if (g_vm.gran(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) return 0;
    return gran;
}

static struct vm_region *vm_find(uintptr_t va) {
    for (int i = 0; i < g_nreg; i++)
        if (g_reg[i].va == va) return &g_reg[i];
    return NULL;
}

extern "C" HIDDEN void *cuda_vm_reserve(cuda_dev *d, size_t bytes) {
    const size_t gran = cuda_vm_granularity(d);
    if (!gran || !bytes) return NULL;
    const size_t size = (bytes + gran - 1) / gran * gran;
    const int n = (int)(size / gran);
    CUdeviceptr va = 0;
    struct vm_chunk **h = (struct vm_chunk **)calloc((size_t)n, sizeof *h);
    if (!h || g_vm.reserve(&va, size, gran, 0, 0) != CUDA_SUCCESS) {
        free(h);
        set_status("cuMemAddressReserve", cudaErrorMemoryAllocation);
        return NULL;
    }
    pthread_mutex_lock(&g_mu);
    struct vm_region *r = (struct vm_region *)realloc(g_reg, sizeof *g_reg * (size_t)(g_nreg + 1));
    if (r) g_reg = r, g_reg[g_nreg++] = (struct vm_region){(uintptr_t)va, size, gran, d->ordinal, n, h};
    pthread_mutex_unlock(&g_mu);
    if (!r) {
        g_vm.afree(va, size);
        free(h);
        return NULL;
    }
    return (void *)va;
}

extern "C" HIDDEN int cuda_vm_is(const void *p) {
    if (!p || g_vm.ok != 1) return 0;
    pthread_mutex_lock(&g_mu);
    int is = vm_find((uintptr_t)p) != NULL;
    pthread_mutex_unlock(&g_mu);
    return is;
}

// the GPU keeps g_vm.spare bytes free after one more chunk: 0, or -1 (the status set)
static int vm_room(size_t gran) {
    size_t fr = 0, total = 0;
    if (cudaMemGetInfo(&fr, &total) != cudaSuccess || fr < gran + g_vm.spare) {
        cudaGetLastError();
        return set_status("a KV cache chunk (the GPU's memory is taken)", cudaErrorMemoryAllocation);
    }
    return 0;
}

// h mapped at [at, at + gran), read and write: 0, or -1 (nothing mapped)
static int vm_map(uintptr_t at, size_t gran, int ordinal, CUmemGenericAllocationHandle h) {
    const CUmemAllocationProp p = vm_prop(ordinal);
    CUmemAccessDesc a;
    memset(&a, 0, sizeof a);
    a.location = p.location, a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (g_vm.map((CUdeviceptr)at, gran, 0, h, 0) != CUDA_SUCCESS) return set_status("cuMemMap", cudaErrorMemoryAllocation);
    if (g_vm.access((CUdeviceptr)at, gran, &a, 1) != CUDA_SUCCESS) {
        g_vm.unmap((CUdeviceptr)at, gran);
        return set_status("cuMemSetAccess", cudaErrorMemoryAllocation);
    }
    return 0;
}

// a new chunk of r's size: NULL where the memory is taken (the status set)
static struct vm_chunk *vm_new(struct vm_region *r) {
    if (vm_room(r->gran)) return NULL;
    const CUmemAllocationProp p = vm_prop(r->ordinal);
    struct vm_chunk *k = (struct vm_chunk *)calloc(1, sizeof *k);
    if (!k) return NULL;
    if (g_vm.create(&k->h, r->gran, &p, 0) != CUDA_SUCCESS) {
        free(k);
        set_status("cuMemCreate", cudaErrorMemoryAllocation);
        return NULL;
    }
    k->refs = 1, g_mapped += r->gran;
    return k;
}

static void vm_unref(struct vm_chunk *k, size_t gran) {
    if (--k->refs > 0) return;
    g_vm.release(k->h);
    g_mapped -= gran;
    free(k);
}

// chunk i of r backed (and zeroed): 0, or -1
static int vm_back(cuda_dev *d, struct vm_region *r, int i) {
    struct vm_chunk *k = vm_new(r);
    const uintptr_t at = r->va + (size_t)i * r->gran;
    if (!k) return -1;
    if (vm_map(at, r->gran, r->ordinal, k->h)) {
        vm_unref(k, r->gran);
        return -1;
    }
    if (cudaMemsetAsync((void *)at, 0, r->gran, d->stream) != cudaSuccess) {
        cudaGetLastError();
        g_vm.unmap((CUdeviceptr)at, r->gran);
        vm_unref(k, r->gran);
        return set_status("a KV cache chunk zeroed", cudaErrorMemoryAllocation);
    }
    r->c[i] = k;
    return 0;
}

static void vm_unback(struct vm_region *r, int i) {
    g_vm.unmap((CUdeviceptr)(r->va + (size_t)i * r->gran), r->gran);
    vm_unref(r->c[i], r->gran);
    r->c[i] = NULL;
}

extern "C" HIDDEN int cuda_vm_commit(cuda_dev *d, void *va, size_t off, size_t len) {
    if (!len) return 0;
    pthread_mutex_lock(&g_mu);
    struct vm_region *r = vm_find((uintptr_t)va);
    int rc = r && off + len <= r->size ? 0 : -1;
    for (size_t i = r ? off / r->gran : 0; !rc && i < (off + len + r->gran - 1) / r->gran; i++)
        if (!r->c[i]) rc = vm_back(d, r, (int)i);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

extern "C" HIDDEN void cuda_vm_trim(cuda_dev *d, void *va, size_t off, size_t len) {
    pthread_mutex_lock(&g_mu);
    struct vm_region *r = vm_find((uintptr_t)va);
    if (r && off < r->size) {
        cudaStreamSynchronize(d->stream); // (nothing queued reads what goes)
        const size_t end = off + len < r->size ? off + len : r->size;
        for (size_t i = (off + r->gran - 1) / r->gran; i < end / r->gran; i++) // (the chunks wholly inside)
            if (r->c[i]) vm_unback(r, (int)i);
    }
    pthread_mutex_unlock(&g_mu);
}

extern "C" HIDDEN void cuda_vm_free(cuda_dev *d, void *va) {
    pthread_mutex_lock(&g_mu);
    struct vm_region *r = vm_find((uintptr_t)va);
    if (r) {
        cudaStreamSynchronize(d->stream);
        for (int i = 0; i < r->n; i++)
            if (r->c[i]) vm_unback(r, i);
        g_vm.afree((CUdeviceptr)r->va, r->size);
        free(r->c);
        *r = g_reg[--g_nreg];
    }
    pthread_mutex_unlock(&g_mu);
}

// [doff, doff + len) of dst's range mapped to the chunks of [soff, soff + len)
// of src's (offsets and length whole chunks of both, on one device): dst's own
// chunks there given back. 0, or -1 where a chunk could not be mapped (that
// chunk and those after it then not backed in dst).
extern "C" HIDDEN int cuda_vm_share(cuda_dev *d, void *dst, size_t doff, void *src, size_t soff, size_t len) {
    pthread_mutex_lock(&g_mu);
    struct vm_region *a = vm_find((uintptr_t)dst), *b = vm_find((uintptr_t)src);
    int rc = a && b && a != b && a->gran == b->gran && a->ordinal == b->ordinal && doff % a->gran == 0 && soff % a->gran == 0 &&
                     len % a->gran == 0 && doff + len <= a->size && soff + len <= b->size
                 ? 0
                 : -1;
    if (!rc) cudaDeviceSynchronize(); // (nothing queued still reads dst's chunks, or writes src's)
    for (size_t k = 0; !rc && k < len / a->gran; k++) {
        const size_t i = doff / a->gran + k, j = soff / a->gran + k;
        if (a->c[i] == b->c[j]) continue;
        if (a->c[i]) vm_unback(a, (int)i);
        if (!b->c[j]) continue; // (not backed there: not here either)
        if (vm_map(a->va + i * a->gran, a->gran, a->ordinal, b->c[j]->h)) rc = -1;
        else a->c[i] = b->c[j], a->c[i]->refs++;
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

// The chunks of [off, off + len) of va's range that other ranges map too, each
// replaced by a copy of its own (copy on write). 0, or -1 where the memory is
// taken (the chunks before the one that failed are its own; that one and those
// after it stay shared).
extern "C" HIDDEN int cuda_vm_private(cuda_dev *d, void *va, size_t off, size_t len) {
    if (!len) return 0;
    pthread_mutex_lock(&g_mu);
    struct vm_region *r = vm_find((uintptr_t)va);
    int rc = r && off + len <= r->size && r->ordinal >= 0 && r->ordinal < 64 ? 0 : -1, synced = 0;
    for (size_t i = r ? off / r->gran : 0; !rc && i < (off + len + r->gran - 1) / r->gran; i++) {
        if (!r->c[i] || r->c[i]->refs < 2) continue;
        if (!synced) cudaDeviceSynchronize(), synced = 1; // (nothing queued writes the chunk: its copy is whole)
        uintptr_t st = g_stage[r->ordinal];
        if (!st) {
            CUdeviceptr sv = 0;
            if (g_vm.reserve(&sv, r->gran, r->gran, 0, 0) != CUDA_SUCCESS) {
                rc = set_status("cuMemAddressReserve", cudaErrorMemoryAllocation);
                break;
            }
            st = g_stage[r->ordinal] = (uintptr_t)sv;
        }
        struct vm_chunk *k = vm_new(r);
        const uintptr_t at = r->va + i * r->gran;
        if (!k || vm_map(st, r->gran, r->ordinal, k->h)) {
            if (k) vm_unref(k, r->gran);
            rc = -1;
            break;
        }
        // (the copy through the staging addresses, then the new chunk mapped where the shared one was; the
        // copy waited for before either unmap: a device-to-device cudaMemcpy returns before it is done)
        cudaError_t e = cudaMemcpyAsync((void *)st, (const void *)at, r->gran, cudaMemcpyDeviceToDevice, d->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);
        g_vm.unmap((CUdeviceptr)st, r->gran);
        if (e != cudaSuccess) {
            cudaGetLastError();
            vm_unref(k, r->gran);
            rc = set_status("a shared KV cache chunk copied", e);
            break;
        }
        g_vm.unmap((CUdeviceptr)at, r->gran);
        if (vm_map(at, r->gran, r->ordinal, k->h)) { // (the shared one back: nothing changed)
            vm_unref(k, r->gran);
            if (vm_map(at, r->gran, r->ordinal, r->c[i]->h)) vm_unref(r->c[i], r->gran), r->c[i] = NULL;
            rc = -1;
            break;
        }
        vm_unref(r->c[i], r->gran);
        r->c[i] = k;
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

// the chunks of [off, off + len) of va's range that other ranges map too
extern "C" HIDDEN int cuda_vm_shared(const void *va, size_t off, size_t len) {
    pthread_mutex_lock(&g_mu);
    struct vm_region *r = vm_find((uintptr_t)va);
    int n = 0;
    for (size_t i = r && len ? off / r->gran : 0; r && len && i < (off + len + r->gran - 1) / r->gran && i < (size_t)r->n; i++)
        n += r->c[i] && r->c[i]->refs > 1;
    pthread_mutex_unlock(&g_mu);
    return n;
}

extern "C" HIDDEN size_t cuda_vm_mapped(void) {
    pthread_mutex_lock(&g_mu);
    size_t m = g_mapped;
    pthread_mutex_unlock(&g_mu);
    return m;
}
