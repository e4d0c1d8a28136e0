// The host communicator (base/comm.h) over both transports, each rank a
// forked process: jobs of 2 and 4 ranks over TCP on 127.0.0.1 and over
// shared memory must give the same bits -- all-reduce sums of values whose
// sum depends on the order (rank order on every rank), gathers of uneven
// column counts, broadcasts from every root, barriers, and buffers larger
// than any chunk either transport moves at once. Then what fails with a
// message naming the rank rather than hanging: a rank that exits, one that
// gives up (comm_abort), collectives that do not match, a rank 0 that never
// comes, ranks that never come, handshakes of another world, job or rank (a
// stray connection that is no rank is ignored), bad addresses.
#include "check.h"
#include "net.h"
#include "base/comm.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#define BIG ((size_t)(1 << 21) + 777) // floats: more than a shared-memory slot (1 << 20) twice, and a TCP piece
enum { ROWS = 5, GROWS = 40 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Rank r's i-th value: magnitudes from 1e-4 to 1e4, both signs, so that
// float sums in different orders round differently.
static float val(int r, size_t i) {
    unsigned h = (unsigned)(r * 7919 + 1) * 2654435761u ^ (unsigned)i * 40503u;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    float m = (float)(h % 100000) / 7.0f;
    static const float scale[] = {1e-4f, 3e-3f, 0.1f, 1.0f, 17.0f, 1e3f, 1e4f};
    return (h & 1 ? -m : m) * scale[(h >> 8) % 7];
}

static comm *join(const char *addr, const char *id, int rank, int world, double timeout) {
    return addr ? comm_open_tcp(addr, id, rank, world, timeout) : comm_open(id, rank, world, timeout);
}

// ---------------------------------------------------------------------------
// a job of forked ranks: each runs fn, which returns its failures (its exit
// status); the parent's count of ranks that failed or hung

typedef int (*rank_fn)(int rank, int world, const char *addr, const char *id, const char *out);

static int run_job(int world, const char *addr, const char *id, rank_fn fn, const char *what) {
    pid_t pids[8];
    fflush(NULL);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(120); // (a hang fails the test instead of stopping it)
            char out[160];
            snprintf(out, sizeof out, "/tmp/%s.r%d", id, r);
            int bad = fn(r, world, addr, id, out);
            fflush(NULL);
            _exit(bad > 100 ? 100 : bad);
        }
    }
    int failed = 0;
    for (int r = 0; r < world; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            failed++;
            fprintf(stderr, "%s, %s, rank %d of %d: %s %d\n", what, addr ? "tcp" : "shared memory", r, world,
                    WIFEXITED(status) ? "failures:" : "killed by signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        }
    }
    return failed;
}

static int write_floats(const char *path, const float *x, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(x, sizeof(float), n, f) == n;
    if (f) fclose(f);
    return ok ? 0 : 1;
}

// a file's bytes (malloc'd), removed; NULL when absent
static char *take_file(const char *path, size_t *n) {
    char *s = test_read_file(path, n);
    unlink(path);
    return s;
}

// ---------------------------------------------------------------------------
// the collectives, on every rank

// gather's columns: uneven, one rank with none
static int gcnt(int r, int world, int big) { return big ? 50000 + 37 * r : (r == 1 ? 0 : 3 + 2 * r); }

static int collectives(int rank, int world, const char *addr, const char *id, const char *out) {
    comm *c = join(addr, id, rank, world, 20);
    if (!c) {
        fprintf(stderr, "rank %d: open: %s\n", rank, comm_last_error());
        return 1;
    }
    int bad = 0;
    if (strcmp(comm_transport(c), addr ? "tcp" : "shared memory") || comm_rank(c) != rank || comm_world(c) != world)
        bad++, fprintf(stderr, "rank %d: transport %s, rank %d of %d\n", rank, comm_transport(c), comm_rank(c), comm_world(c));
    // all-reduce, small and big: each equal to the sum in rank order here
    float *x = malloc(sizeof(float) * BIG), *all = malloc(sizeof(float) * (BIG + 3));
    size_t sizes[] = {3, BIG}, at = 0;
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        for (size_t i = 0; i < n; i++) x[i] = val(rank, i + k);
        if (comm_allreduce(c, x, n)) {
            fprintf(stderr, "rank %d: allreduce of %zu: %s\n", rank, n, comm_error(c));
            bad++;
            break;
        }
        size_t off = 0;
        for (size_t i = 0; i < n; i++) {
            float s = val(0, i + k);
            for (int r = 1; r < world; r++) s += val(r, i + k);
            off += memcmp(&s, &x[i], sizeof s) != 0;
        }
        if (off) bad++, fprintf(stderr, "rank %d: allreduce of %zu: %zu values not the sum in rank order\n", rank, n, off);
        memcpy(all + at, x, sizeof(float) * n), at += n;
    }
    bad += write_floats(out, all, at);
    // all-gather by columns, into rows wider than the columns (the rest untouched)
    for (int big = 0; big < 2 && !bad; big++) {
        int cnt[8], rows = big ? GROWS : ROWS;
        size_t total = 0;
        for (int r = 0; r < world; r++) cnt[r] = gcnt(r, world, big), total += (size_t)cnt[r];
        size_t ld = total + 3;
        float *part = malloc(sizeof(float) * (size_t)rows * cnt[rank] + 1), *g = malloc(sizeof(float) * ld * rows);
        for (int t = 0; t < rows; t++)
            for (int j = 0; j < cnt[rank]; j++) part[(size_t)t * cnt[rank] + j] = val(rank, (size_t)t * 1000 + j);
        for (size_t i = 0; i < ld * rows; i++) g[i] = -1.0f;
        if (comm_allgather_cols(c, part, rows, cnt, g, ld)) {
            fprintf(stderr, "rank %d: allgather (%d rows): %s\n", rank, rows, comm_error(c));
            bad++;
        } else {
            size_t off = 0;
            for (int t = 0; t < rows; t++) {
                size_t col = 0;
                for (int r = 0; r < world; r++)
                    for (int j = 0; j < cnt[r]; j++) off += g[ld * t + col++] != val(r, (size_t)t * 1000 + j);
                for (; col < ld; col++) off += g[ld * t + col] != -1.0f;
            }
            if (off) bad++, fprintf(stderr, "rank %d: allgather (%d rows): %zu values wrong\n", rank, rows, off);
        }
        free(part), free(g);
    }
    // broadcast from every root: a few bytes, and more than a chunk (not a multiple of 4)
    size_t nb[] = {10, sizeof(float) * BIG + 3};
    unsigned char *b = (unsigned char *)all;
    for (int root = 0; root < world && !bad; root++)
        for (int k = 0; k < 2; k++) {
            for (size_t i = 0; i < nb[k]; i++) b[i] = (unsigned char)(rank == root ? i * 31 + root : 0xee);
            if (comm_bcast(c, b, nb[k], root)) {
                fprintf(stderr, "rank %d: bcast of %zu from %d: %s\n", rank, nb[k], root, comm_error(c));
                bad++;
                break;
            }
            size_t off = 0;
            for (size_t i = 0; i < nb[k]; i++) off += b[i] != (unsigned char)(i * 31 + root);
            if (off) bad++, fprintf(stderr, "rank %d: bcast of %zu from %d: %zu bytes wrong\n", rank, nb[k], root, off);
        }
    free(x), free(all);
    comm_close(c);
    return bad;
}

// Barriers: the ranks arrive at different times; none leaves before all came.
static int *g_arrived; // (shared by the forked ranks)

static int barriers(int rank, int world, const char *addr, const char *id, const char *out) {
    comm *c = join(addr, id, rank, world, 20);
    if (!c) return 1;
    int bad = 0;
    for (int round = 1; round <= 3 && !bad; round++) {
        usleep((useconds_t)(20000 * ((rank + round) % world)));
        __atomic_add_fetch(g_arrived, 1, __ATOMIC_SEQ_CST);
        if (comm_barrier(c)) bad++, fprintf(stderr, "rank %d: barrier: %s\n", rank, comm_error(c));
        int n = __atomic_load_n(g_arrived, __ATOMIC_SEQ_CST);
        if (n < round * world) bad++, fprintf(stderr, "rank %d: left barrier %d with %d arrivals\n", rank, round, n);
        if (comm_barrier(c)) bad++; // (no one counts the next round before all have read this one)
    }
    comm_close(c);
    return bad;
}

static void check_collectives(int world) {
    char id[64], addr[64];
    comm_new_id(id, sizeof id);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", test_free_port());
    CHECK(run_job(world, NULL, id, collectives, "collectives") == 0, "collectives over shared memory, %d ranks", world);
    size_t n_shm[8], n_tcp[8];
    char path[160], *shm[8], *tcp[8];
    for (int r = 0; r < world; r++) snprintf(path, sizeof path, "/tmp/%s.r%d", id, r), shm[r] = take_file(path, &n_shm[r]);
    comm_new_id(id, sizeof id);
    double t0 = now();
    CHECK(run_job(world, addr, id, collectives, "collectives") == 0, "collectives over tcp (%s), %d ranks", addr, world);
    printf("tcp, %d ranks: all-reduce, all-gather, broadcast (%zu floats) in %.2f s\n", world, BIG, now() - t0);
    for (int r = 0; r < world; r++) snprintf(path, sizeof path, "/tmp/%s.r%d", id, r), tcp[r] = take_file(path, &n_tcp[r]);
    for (int r = 0; r < world; r++) {
        CHECK(shm[r] && tcp[r] && n_shm[r] == n_tcp[r] && n_shm[r] == sizeof(float) * (BIG + 3) && !memcmp(shm[r], tcp[r], n_shm[r]),
              "%d ranks: rank %d's all-reduce sums differ between shared memory and tcp", world, r);
        CHECK(tcp[r] && tcp[0] && n_tcp[r] == n_tcp[0] && !memcmp(tcp[r], tcp[0], n_tcp[0]), "tcp, %d ranks: ranks 0 and %d differ", world, r);
    }
    // (the values are such that the order of the sum shows, from 3 ranks on: a + b is b + a)
    if (world > 2 && tcp[0] && n_tcp[0] == sizeof(float) * (BIG + 3)) {
        const float *s = (const float *)tcp[0] + 3;
        size_t differ = 0;
        for (size_t i = 0; i < BIG; i++) {
            float rev = val(world - 1, i + 1);
            for (int r = world - 2; r >= 0; r--) rev += val(r, i + 1);
            differ += rev != s[i];
        }
        CHECK(differ > 0, "%d ranks: no value whose sum depends on the order", world);
    }
    for (int r = 0; r < world; r++) free(shm[r]), free(tcp[r]);
    // barriers
    g_arrived = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    for (int t = 0; t < 2; t++) {
        *g_arrived = 0;
        comm_new_id(id, sizeof id);
        snprintf(addr, sizeof addr, "127.0.0.1:%d", test_free_port());
        CHECK(run_job(world, t ? addr : NULL, id, barriers, "barriers") == 0, "barriers over %s, %d ranks", t ? "tcp" : "shared memory", world);
    }
    munmap(g_arrived, sizeof(int));
}

// ---------------------------------------------------------------------------
// failures: a message naming the rank, never a hang

static int g_victim; // the rank that dies (or gives up), 0 < g_victim < world
static int g_abort;  // 1: it gives up by comm_abort; 0: it exits

static int dies(int rank, int world, const char *addr, const char *id, const char *out) {
    comm *c = join(addr, id, rank, world, 20);
    if (!c) return 1;
    if (rank == g_victim) {
        if (g_abort) comm_abort(c), usleep(200000);
        _exit(0); // (its connections close with it)
    }
    float x[4] = {1, 2, 3, 4};
    double t0 = now();
    int st = comm_allreduce(c, x, 4);
    char want[32];
    snprintf(want, sizeof want, "rank %d", g_victim);
    int bad = 0;
    if (st == 0 || !strstr(comm_error(c), want)) bad++, fprintf(stderr, "rank %d beside a dead rank %d: %s\n", rank, g_victim, st ? comm_error(c) : "succeeded");
    if (now() - t0 > 10) bad++, fprintf(stderr, "rank %d: %.1f s to notice\n", rank, now() - t0);
    // the communicator stays failed
    if (comm_barrier(c) == 0) bad++, fprintf(stderr, "rank %d: a barrier after the failure succeeded\n", rank);
    if (rank == 1 || rank == 0) printf("  %s, rank %d: %s\n", g_abort ? "comm_abort" : "exit", rank, comm_error(c));
    comm_close(c);
    return bad;
}

// rank 1 calls a collective of another length than the others'
static int mismatched(int rank, int world, const char *addr, const char *id, const char *out) {
    comm *c = join(addr, id, rank, world, 20);
    if (!c) return 1;
    float x[8] = {0};
    int st = comm_allreduce(c, x, rank == 1 ? 8 : 5);
    int bad = st == 0 || !strstr(comm_error(c), "rank");
    if (bad) fprintf(stderr, "rank %d, mismatched all-reduce: %s\n", rank, st ? comm_error(c) : "succeeded");
    if (rank == 0) printf("  mismatched, rank 0: %s\n", comm_error(c));
    comm_close(c);
    return bad;
}

// Opens rank `rank` of `world` of job id at addr: a child's exit status is 0
// when comm_open_tcp fails with `want` in its message (want NULL: succeeds,
// then a barrier).
static pid_t open_as(const char *addr, const char *id, int rank, int world, double timeout, const char *want) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid) return pid;
    alarm(60);
    comm *c = comm_open_tcp(addr, id, rank, world, timeout);
    if (!want) {
        int bad = !c || comm_barrier(c);
        if (bad) fprintf(stderr, "rank %d of %d, job %s: %s\n", rank, world, id, c ? comm_error(c) : comm_last_error());
        comm_close(c);
        fflush(NULL);
        _exit(bad);
    }
    int ok = !c && strstr(comm_last_error(), want);
    if (!ok) fprintf(stderr, "rank %d of %d, job %s: want \"%s\", got: %s\n", rank, world, id, want, c ? "opened" : comm_last_error());
    else printf("  refused: %s\n", comm_last_error());
    comm_close(c);
    fflush(NULL);
    _exit(!ok);
}

static int exited_ok(pid_t pid) {
    int status = 0;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void check_failures(void) {
    char id[64], addr[64], other[64];
    for (int world = 2; world <= 4; world += 2)
        for (g_abort = 0; g_abort < 2; g_abort++) {
            g_victim = world == 2 ? 1 : 3 - g_abort; // (4 ranks: rank 3 exits, rank 2 gives up)
            comm_new_id(id, sizeof id);
            snprintf(addr, sizeof addr, "127.0.0.1:%d", test_free_port());
            CHECK(run_job(world, addr, id, dies, "dead rank") == 0, "tcp, %d ranks: rank %d %s: the others did not fail naming it", world,
                  g_victim, g_abort ? "gave up" : "exited");
        }
    comm_new_id(id, sizeof id);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", test_free_port());
    CHECK(run_job(2, addr, id, mismatched, "mismatched") == 0, "tcp: an all-reduce of 8 against one of 5 not refused");

    // handshakes refused: another world, another job, rank 0's own number, a rank already in; a stray connection ignored
    comm_new_id(id, sizeof id);
    comm_new_id(other, sizeof other);
    other[0] = 'X';
    snprintf(addr, sizeof addr, "127.0.0.1:%d", test_free_port());
    pid_t root = open_as(addr, id, 0, 3, 30, NULL);
    CHECK(exited_ok(open_as(addr, id, 1, 4, 10, "world 4 is not rank 0's 3")), "a rank of world 4 joined a job of 3");
    CHECK(exited_ok(open_as(addr, other, 1, 3, 10, "job id")), "a rank of another job joined");
    CHECK(exited_ok(open_as(addr, id, 0, 3, 10, "listening at")), "a second rank 0 listened at the same address");
    {
        int fd = socket(AF_INET, SOCK_STREAM, 0), port = atoi(strrchr(addr, ':') + 1);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        char junk[200];
        memset(junk, 'G', sizeof junk);
        int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, junk, sizeof junk) == (ssize_t)sizeof junk;
        CHECK(ok, "a stray connection to rank 0");
        if (fd >= 0) close(fd);
    }
    pid_t one = open_as(addr, id, 1, 3, 10, NULL);
    usleep(1000000); // (rank 1 in)
    CHECK(exited_ok(open_as(addr, id, 1, 3, 10, "rank 1 has joined already")), "a second rank 1 joined");
    pid_t two = open_as(addr, id, 2, 3, 10, NULL);
    CHECK(exited_ok(root) && exited_ok(one) && exited_ok(two), "the job of 3 after the refused ones");

    // rank 0 never comes; rank 1 never comes
    comm_new_id(id, sizeof id);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", test_free_port());
    double t0 = now();
    CHECK(exited_ok(open_as(addr, id, 1, 2, 1, "rank 0 at 127.0.0.1")), "rank 1 without a rank 0");
    double t = now() - t0;
    CHECK(t >= 0.9 && t < 8, "rank 1 without a rank 0: %.1f s for a timeout of 1", t);
    t0 = now();
    CHECK(exited_ok(open_as(addr, id, 0, 2, 1, "1 of 2 ranks joined")), "rank 0 without a rank 1");
    t = now() - t0;
    CHECK(t >= 0.9 && t < 8, "rank 0 without a rank 1: %.1f s for a timeout of 1", t);
    // rank 0 gives up on its job while rank 1 waits to start: rank 1 hears why
    comm_new_id(id, sizeof id);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", test_free_port());
    root = open_as(addr, id, 0, 3, 1, "of 3 ranks joined"); // (rank 2 never comes)
    CHECK(exited_ok(open_as(addr, id, 1, 3, 20, "2 of 3 ranks joined")), "rank 1 of a job whose rank 0 gave up");
    CHECK(exited_ok(root), "rank 0 of a job of 3 with 2 there");

    // addresses
    const char *bad[][2] = {{"127.0.0.1", "host:port"},    {"127.0.0.1:", "host:port"},   {":5000", "host:port"},
                            {"127.0.0.1:0", "port \"0\""}, {"127.0.0.1:70000", "65535"}, {"127.0.0.1:12x", "port \"12x\""}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        comm *c = comm_open_tcp(bad[i][0], "job", i % 2, 2, 1);
        CHECK(!c && strstr(comm_last_error(), bad[i][1]), "address \"%s\": %s", bad[i][0], c ? "accepted" : comm_last_error());
        comm_close(c);
    }
    CHECK(!comm_open_tcp("127.0.0.1:1", "bad/id", 1, 2, 1) && strstr(comm_last_error(), "job id"), "a job id with '/': %s", comm_last_error());
    comm *c = comm_open_tcp("127.0.0.1:1", NULL, 0, 1, 1); // (a world of one: nothing to meet)
    float x = 2.5f;
    CHECK(c && !strcmp(comm_transport(c), "none") && comm_allreduce(c, &x, 1) == 0 && x == 2.5f, "tcp, world 1");
    comm_close(c);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN); // (the stray connection's write)
    check_collectives(2);
    check_collectives(4);
    check_failures();
    return check_summary("test_comm");
}
