// y (T, n_out) = x (T, n_in) @ W^T with W in its stored type, split over
// output rows across the thread pool. Each weight row is read once for all T
// tokens, so a prompt costs one pass over the weights per N_BATCH tokens.
#include "compute/cpu/ops.h"
#include "models/dtype.h"
#include "base/pool.h"

typedef struct {
    float *y;
    const float *x;
    const tensor *W;
    const float *bias;
    int T, n_in, n_out;
    int trans;
} mm_job;

// Rows [j0, j1) of the output for every token.
static void rows_range(const mm_job *a, int j0, int j1) {
    const dtype_traits *tr = dtype_get(a->W->type);
    size_t rs = dtype_row_size(a->W->type, a->n_in);
    const char *base = a->W->data;
    for (int j = j0; j < j1; j++) {
        const void *row = base + rs * (size_t)j;
        float b = a->bias ? a->bias[j] : 0.0f;
        for (int t = 0; t < a->T; t++)
            a->y[(size_t)t * a->n_out + j] = tr->dot(row, a->x + (size_t)t * a->n_in, a->n_in) + b;
    }
}

// W stored [n_in, n_out] (GPT-2 Conv1D): columns [j0, j1) of y, a row of W at a time.
static void trans_range(const mm_job *a, int j0, int j1) {
    const dtype_traits *tr = dtype_get(a->W->type);
    size_t rs = dtype_row_size(a->W->type, a->n_out);
    enum { CH = 256 };
    float buf[CH];
    for (int t = 0; t < a->T; t++)
        for (int j = j0; j < j1; j++) a->y[(size_t)t * a->n_out + j] = a->bias ? a->bias[j] : 0.0f;
    for (int i = 0; i < a->n_in; i++) {
        const char *row = (const char *)a->W->data + rs * (size_t)i;
        for (int c0 = j0; c0 < j1; c0 += CH) {
            int n = j1 - c0 < CH ? j1 - c0 : CH;
            // float types have 1-element blocks, so any chunk boundary works
            tr->to_float(row + (size_t)c0 * tr->size, buf, n);
            for (int t = 0; t < a->T; t++) {
                float xi = a->x[(size_t)t * a->n_in + i];
                float *yt = a->y + (size_t)t * a->n_out + c0;
                for (int j = 0; j < n; j++) yt[j] += xi * buf[j];
            }
        }
    }
}

static void mm_task(void *arg, int ith, int nth) {
    const mm_job *a = arg;
    int per = (a->n_out + nth - 1) / nth;
    int j0 = ith * per, j1 = j0 + per > a->n_out ? a->n_out : j0 + per;
    if (j0 >= j1) return;
    if (a->trans) trans_range(a, j0, j1);
    else rows_range(a, j0, j1);
}

void matmul(float *y, const float *x, const weight *w, const float *bias, int T, int n_in, int n_out) {
    mm_job a = {y, x, w->w, bias, T, n_in, n_out, w->trans};
    // small products are not worth waking the pool
    if ((size_t)n_in * n_out * T < 32768 || pool_threads() == 1) {
        if (w->trans) trans_range(&a, 0, n_out);
        else rows_range(&a, 0, n_out);
        return;
    }
    pool_run(mm_task, &a);
}
