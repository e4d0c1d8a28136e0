// The communicator's TCP transport (comm.h: comm_open_tcp), for ranks on
// several hosts: a star around rank 0. Rank 0 listens at the job's address;
// every other rank connects to it and says who it is. In each collective the
// other ranks send their part to rank 0, which sums the parts in rank order
// (rank 0's, then rank 1's, ...: the shared-memory transport's order, so the
// same bits) or puts them in place, then sends the whole to each rank.
// Latency is two hops and rank 0 carries every byte: a bootstrap and a
// correct fallback; NCCL (its own sockets or InfiniBand) carries a GPU's sums.
//
// On the wire, in host byte order (a job's hosts share one; the magic of a
// host of the other order does not match):
//   hello  (rank r to rank 0)  magic, version, world, rank, id[72]
//   reply  (rank 0 to rank r)  magic, status (0: welcome), text[200]: why not
//   then messages              magic, op, len (bytes), and len bytes
// Each receiver knows what it expects: a message of another op or length
// fails the collective (nothing is allocated from a length a peer sends).
// A failure sends an abort message with the reason to the peers, then closes
// the connections, so no rank waits on a job that has failed.
#include "base/comm_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HELLO_MAGIC 0x31707469u // "itp1"
#define MSG_MAGIC 0x3167736du   // "msg1"
#define TCP_VERSION 1u
#define PIECE ((size_t)1 << 16) // floats: rank 0 sums a part 256 KiB at a time
#define HELLO_WAIT 5.0          // seconds a connection has to say hello

typedef struct {
    uint32_t magic, version, world, rank;
    char id[72]; // the job id, NUL-padded
} hello;
typedef struct {
    uint32_t magic, status;
    char text[200]; // status != 0: why rank 0 refused
} reply;
typedef struct {
    uint32_t magic, op;
    uint64_t len; // bytes that follow
} msg;
_Static_assert(sizeof(hello) == 88 && sizeof(reply) == 208 && sizeof(msg) == 16, "wire layouts");

enum { OP_GO = 1, OP_BARRIER, OP_REDUCE, OP_GATHER, OP_BCAST, OP_ABORT };
static const char *op_names[] = {"?", "a start", "a barrier", "an all-reduce", "an all-gather", "a broadcast", "an abort"};

typedef struct {
    int fd[COMM_MAX_RANKS]; // rank 0: rank r's connection at fd[r]; another rank: rank 0's at fd[0]
    int failed;             // the job failed (peers told, connections closed)
    double timeout;         // seconds a begun message has to end
    char addr[128];         // rank 0's host:port
    float *piece;           // rank 0: PIECE floats to sum a part through
} tcp;

#define T(c) ((tcp *)(c)->t)
#define now comm_now
#define set_err comm_set_err

// "rank 3", or "rank 0 at host:port"
static const char *who(const comm *c, int r, char *buf, size_t cap) {
    if (r == 0) snprintf(buf, cap, "rank 0 at %s", T(c)->addr);
    else snprintf(buf, cap, "rank %d", r);
    return buf;
}

// The job failed: the peers hear why (an abort message, as far as their
// connections take it now), then every connection closes.
static void fail_job(comm *c, const char *why) {
    tcp *k = T(c);
    if (k->failed) return;
    k->failed = 1;
    // (a failure heard from another rank goes on as it came: it names its rank)
    const char *heard = strncmp(why, "the job failed: ", 16) ? NULL : why + 16;
    char text[256];
    int len = heard ? snprintf(text, sizeof text, "%s", heard) : snprintf(text, sizeof text, "rank %d: %s", c->rank, why);
    len = len < 0 ? 0 : len >= (int)sizeof text ? (int)sizeof text - 1 : len;
    char buf[sizeof(msg) + sizeof text];
    msg h = {MSG_MAGIC, OP_ABORT, (uint64_t)len};
    memcpy(buf, &h, sizeof h), memcpy(buf + sizeof h, text, (size_t)len);
    for (int r = 0; r < c->world; r++)
        if (k->fd[r] >= 0) {
            // (a full buffer drops it: the close says the job is over instead)
            (void)send(k->fd[r], buf, sizeof h + (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
            // end of stream after it; what the peer sent and we did not read
            // goes, lest the close reset the connection before the peer reads why
            shutdown(k->fd[r], SHUT_WR);
            char sink[4096];
            for (int i = 0; i < 4096 && recv(k->fd[r], sink, sizeof sink, MSG_DONTWAIT) > 0; i++) {
            }
            close(k->fd[r]), k->fd[r] = -1;
        }
}

static int failed(comm *c) {
    fail_job(c, c->err);
    return -1;
}

// Waits until the connection to rank `peer` is ready for ev (POLLIN,
// POLLOUT), until deadline (< 0: no limit). 0, or -1 (c->err set). (Only
// that connection: the others' ranks are each at most one message ahead, so
// a dead one is met when its turn comes; and a rank whose last collective
// was a broadcast from it may leave while rank 0 still relays it.)
static int wait_fd(comm *c, int peer, short ev, double deadline) {
    tcp *k = T(c);
    struct pollfd p = {k->fd[peer], ev, 0};
    char b[160];
    for (;;) {
        int ms = 1000000;
        if (deadline >= 0) {
            double left = deadline - now();
            if (left <= 0) {
                set_err(c, "%s: nothing for %.0f s in the middle of a message", who(c, peer, b, sizeof b), k->timeout);
                return -1;
            }
            ms = left < 1000 ? (int)(left * 1000) + 1 : 1000000;
        }
        int got = poll(&p, 1, ms);
        if (got < 0 && errno != EINTR) {
            set_err(c, "poll: %s", strerror(errno));
            return -1;
        }
        if (got > 0) return 0; // (a hang-up or an error shows at the read or the write)
    }
}

// An abort message waiting from rank `peer` (whose connection refused a
// write): 1 with its reason in c->err, else 0.
static int heard_abort(comm *c, int peer) {
    msg h;
    char text[256] = {0};
    int fd = T(c)->fd[peer];
    if (recv(fd, &h, sizeof h, MSG_DONTWAIT) != (ssize_t)sizeof h || h.magic != MSG_MAGIC || h.op != OP_ABORT || h.len >= sizeof text)
        return 0;
    if (recv(fd, text, (size_t)h.len, MSG_DONTWAIT) != (ssize_t)h.len) return 0;
    set_err(c, "the job failed: %s", text);
    return 1;
}

// n bytes to rank `peer`. (No limit on the wait: a live peer that does not
// read yet is busy with another rank's part; a dead host's connection fails
// by TCP_USER_TIMEOUT.)
static int send_all(comm *c, int peer, const void *p, size_t n) {
    char b[160];
    for (const char *s = p; n;) {
        ssize_t w = send(T(c)->fd[peer], s, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            s += w, n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_fd(c, peer, POLLOUT, -1)) return -1;
            continue;
        }
        int e = errno;
        if (w < 0 && (e == EPIPE || e == ECONNRESET) && heard_abort(c, peer)) return -1;
        set_err(c, "%s closed its connection (%s)", who(c, peer, b, sizeof b), w < 0 ? strerror(e) : "no progress");
        return -1;
    }
    return 0;
}

// n bytes from rank `peer`, all by deadline (< 0: no limit).
static int recv_all(comm *c, int peer, void *p, size_t n, double deadline) {
    char b[160];
    for (char *s = p; n;) {
        ssize_t got = recv(T(c)->fd[peer], s, n, MSG_DONTWAIT);
        if (got > 0) {
            s += got, n -= (size_t)got;
            continue;
        }
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_fd(c, peer, POLLIN, deadline)) return -1;
            continue;
        }
        set_err(c, "%s closed its connection (%s)", who(c, peer, b, sizeof b), got == 0 ? "it exited, or gave up" : strerror(errno));
        return -1;
    }
    return 0;
}

static int send_head(comm *c, int peer, int op, uint64_t len) {
    msg h = {MSG_MAGIC, (uint32_t)op, len};
    return send_all(c, peer, &h, sizeof h);
}

// The head of rank peer's next message, which must be op with len bytes:
// its first byte waited for without limit, the rest by the timeout.
static int recv_head(comm *c, int peer, int op, uint64_t len) {
    tcp *k = T(c);
    msg h;
    char b[160];
    if (wait_fd(c, peer, POLLIN, -1) || recv_all(c, peer, &h, sizeof h, now() + k->timeout)) return -1;
    if (h.magic != MSG_MAGIC) {
        set_err(c, "%s sent a message without the job's magic (0x%08x)", who(c, peer, b, sizeof b), h.magic);
        return -1;
    }
    if (h.op == OP_ABORT) {
        char text[256] = {0};
        if (h.len >= sizeof text || recv_all(c, peer, text, (size_t)h.len, now() + k->timeout)) {
            set_err(c, "%s aborted the job", who(c, peer, b, sizeof b));
            return -1;
        }
        set_err(c, "the job failed: %s", text);
        return -1;
    }
    if (h.op != (uint32_t)op || h.len != len) {
        const char *name = h.op < sizeof op_names / sizeof *op_names ? op_names[h.op] : "a message";
        set_err(c, "%s sent %s of %llu bytes where rank %d expects %s of %llu", who(c, peer, b, sizeof b), name,
                (unsigned long long)h.len, c->rank, op_names[op], (unsigned long long)len);
        return -1;
    }
    return 0;
}

// ---------------------------------------------------------------------------
// the collectives

static int tcp_barrier(comm *c) {
    if (T(c)->failed) return -1;
    if (c->rank) return send_head(c, 0, OP_BARRIER, 0) || recv_head(c, 0, OP_BARRIER, 0) ? failed(c) : 0;
    for (int r = 1; r < c->world; r++)
        if (recv_head(c, r, OP_BARRIER, 0)) return failed(c);
    for (int r = 1; r < c->world; r++)
        if (send_head(c, r, OP_BARRIER, 0)) return failed(c);
    return 0;
}

static int tcp_allreduce(comm *c, float *x, size_t n) {
    tcp *k = T(c);
    uint64_t bytes = sizeof(float) * (uint64_t)n;
    if (k->failed) return -1;
    if (c->rank) {
        int bad = send_head(c, 0, OP_REDUCE, bytes) || send_all(c, 0, x, (size_t)bytes) || recv_head(c, 0, OP_REDUCE, bytes) ||
                  recv_all(c, 0, x, (size_t)bytes, now() + k->timeout);
        return bad ? failed(c) : 0;
    }
    // the sum in rank order: x (rank 0's) + rank 1's + rank 2's ...
    for (int r = 1; r < c->world; r++) {
        if (recv_head(c, r, OP_REDUCE, bytes)) return failed(c);
        double deadline = now() + k->timeout;
        for (size_t at = 0; at < n; at += PIECE) {
            size_t len = n - at < PIECE ? n - at : PIECE;
            if (recv_all(c, r, k->piece, sizeof(float) * len, deadline)) return failed(c);
            for (size_t i = 0; i < len; i++) x[at + i] += k->piece[i];
        }
    }
    for (int r = 1; r < c->world; r++)
        if (send_head(c, r, OP_REDUCE, bytes) || send_all(c, r, x, (size_t)bytes)) return failed(c);
    return 0;
}

static int tcp_allgather_cols(comm *c, const float *part, int rows, const int *cnt, const size_t *off, float *out, size_t ld) {
    tcp *k = T(c);
    if (k->failed) return -1;
    size_t total = off[c->world - 1] + (size_t)cnt[c->world - 1], me = (size_t)cnt[c->rank];
    uint64_t whole = sizeof(float) * (uint64_t)rows * total;
    if (c->rank) {
        if (send_head(c, 0, OP_GATHER, sizeof(float) * (uint64_t)rows * me) || send_all(c, 0, part, sizeof(float) * rows * me) ||
            recv_head(c, 0, OP_GATHER, whole))
            return failed(c);
        double deadline = now() + k->timeout;
        for (int t = 0; t < rows; t++)
            if (recv_all(c, 0, out + ld * t, sizeof(float) * total, deadline)) return failed(c);
        return 0;
    }
    for (int t = 0; t < rows; t++) memcpy(out + ld * t + off[0], part + me * t, sizeof(float) * me);
    for (int r = 1; r < c->world; r++) {
        size_t w = (size_t)cnt[r];
        if (recv_head(c, r, OP_GATHER, sizeof(float) * (uint64_t)rows * w)) return failed(c);
        double deadline = now() + k->timeout;
        for (int t = 0; t < rows; t++)
            if (recv_all(c, r, out + ld * t + off[r], sizeof(float) * w, deadline)) return failed(c);
    }
    for (int r = 1; r < c->world; r++) {
        if (send_head(c, r, OP_GATHER, whole)) return failed(c);
        for (int t = 0; t < rows; t++)
            if (send_all(c, r, out + ld * t, sizeof(float) * total)) return failed(c);
    }
    return 0;
}

static int tcp_bcast(comm *c, void *p, size_t n, int root) {
    tcp *k = T(c);
    if (k->failed) return -1;
    if (c->rank == root && root != 0) return send_head(c, 0, OP_BCAST, n) || send_all(c, 0, p, n) ? failed(c) : 0;
    if (c->rank) return recv_head(c, 0, OP_BCAST, n) || recv_all(c, 0, p, n, now() + k->timeout) ? failed(c) : 0;
    // rank 0: its bytes, or the root's relayed a piece at a time
    if (root != 0 && recv_head(c, root, OP_BCAST, n)) return failed(c);
    for (int r = 1; r < c->world; r++)
        if (r != root && send_head(c, r, OP_BCAST, n)) return failed(c);
    double deadline = now() + k->timeout;
    for (size_t at = 0; at < n; at += sizeof(float) * PIECE) {
        size_t len = n - at < sizeof(float) * PIECE ? n - at : sizeof(float) * PIECE;
        char *s = (char *)p + at;
        if (root != 0 && recv_all(c, root, s, len, deadline)) return failed(c);
        for (int r = 1; r < c->world; r++)
            if (r != root && send_all(c, r, s, len)) return failed(c);
    }
    return 0;
}

static void tcp_abort(comm *c) {
    if (!T(c)->failed) set_err(c, "this rank gave up (comm_abort)");
    fail_job(c, "gave up");
}

static void tcp_close(comm *c) {
    tcp *k = T(c);
    for (int r = 0; r < c->world; r++)
        if (k->fd[r] >= 0) close(k->fd[r]);
    free(k->piece);
    free(k);
    c->t = NULL;
}

static const comm_ops tcp_ops = {
    .name = "tcp",
    .barrier = tcp_barrier,
    .allreduce = tcp_allreduce,
    .allgather_cols = tcp_allgather_cols,
    .bcast = tcp_bcast,
    .abort = tcp_abort,
    .close = tcp_close,
};

// ---------------------------------------------------------------------------
// meeting: rank 0 listens, the others connect

// "host:port" or "[v6]:port" resolved (passive: for rank 0's bind). 0, or -1 with err.
static int resolve(const char *addr, int passive, struct addrinfo **res, char *err, size_t cap) {
    char host[128];
    const char *colon = strrchr(addr, ':'), *h = addr;
    size_t hn = colon ? (size_t)(colon - addr) : 0;
    if (hn && addr[0] == '[' && addr[hn - 1] == ']') h = addr + 1, hn -= 2;
    if (!colon || hn == 0 || hn >= sizeof host || !colon[1]) {
        snprintf(err, cap, "tcp address \"%s\": host:port (or [v6 address]:port)", addr);
        return -1;
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535) {
        snprintf(err, cap, "tcp address \"%s\": port \"%s\" is not 1 to 65535", addr, colon + 1);
        return -1;
    }
    memcpy(host, h, hn), host[hn] = 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
    int e = getaddrinfo(host, colon + 1, &hints, res);
    if (e) {
        snprintf(err, cap, "tcp address \"%s\": %s", addr, gai_strerror(e));
        return -1;
    }
    return 0;
}

// A connection's options: non-blocking; small messages go at once; a peer
// whose host is gone is noticed in about 30 s (keepalive probes while idle,
// TCP_USER_TIMEOUT while data waits unacknowledged).
static void tune(int fd) {
    int one = 1, idle = 10, intvl = 5, cnt = 4;
    unsigned user_ms = 30000;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof user_ms);
}

// n bytes from fd by deadline, for the handshake: 0, or -1.
static int read_within(int fd, void *p, size_t n, double deadline) {
    for (char *s = p; n;) {
        ssize_t got = recv(fd, s, n, MSG_DONTWAIT);
        if (got > 0) {
            s += got, n -= (size_t)got;
            continue;
        }
        if (got == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) return -1;
        struct pollfd pf = {fd, POLLIN, 0};
        double left = deadline - now();
        if (left <= 0) return -1;
        poll(&pf, 1, (int)(left * 1000) + 1);
    }
    return 0;
}

// Rank 0: listens, takes each rank's hello (refusing, with the reason, one of
// another job, world or a rank already in), then starts the job.
static int open_root(comm *c, const char *id, double t_end, char *err, size_t cap) {
    tcp *k = T(c);
    struct addrinfo *res;
    if (resolve(k->addr, 1, &res, err, cap)) return -1;
    int lfd = -1, e = 0;
    for (struct addrinfo *a = res; a && lfd < 0; a = a->ai_next) {
        int one = 1;
        lfd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (lfd < 0) {
            e = errno;
            continue;
        }
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(lfd, a->ai_addr, a->ai_addrlen) || listen(lfd, COMM_MAX_RANKS)) e = errno, close(lfd), lfd = -1;
    }
    freeaddrinfo(res);
    if (lfd < 0) {
        snprintf(err, cap, "tcp: listening at %s: %s", k->addr, strerror(e));
        return -1;
    }
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
    int joined = 0;
    char refused[200] = "";
    while (joined < c->world - 1) {
        double left = t_end - now();
        struct pollfd p = {lfd, POLLIN, 0};
        if (left <= 0) {
            snprintf(err, cap, "job %s: %d of %d ranks joined in %.0f s at %s%s%.150s", id, joined + 1, c->world, k->timeout, k->addr,
                     refused[0] ? "; refused: " : "", refused);
            close(lfd);
            fail_job(c, err);
            return -1;
        }
        if (poll(&p, 1, left < 1000 ? (int)(left * 1000) + 1 : 1000000) <= 0) continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        tune(fd);
        // its hello, within a few seconds (a stray connection cannot hold the job)
        hello h;
        reply rp = {HELLO_MAGIC, 1, ""};
        double hend = now() + HELLO_WAIT < t_end ? now() + HELLO_WAIT : t_end;
        int ok = read_within(fd, &h, sizeof h, hend) == 0;
        h.id[sizeof h.id - 1] = 0;
        if (!ok || h.magic != HELLO_MAGIC || h.version != TCP_VERSION) {
            snprintf(refused, sizeof refused, "a connection that is not a rank of infer's (version %u)", TCP_VERSION);
            close(fd);
            continue;
        }
        if (strcmp(h.id, id)) snprintf(rp.text, sizeof rp.text, "job id \"%.64s\" is not rank 0's \"%.64s\"", h.id, id);
        else if (h.world != (uint32_t)c->world) snprintf(rp.text, sizeof rp.text, "world %u is not rank 0's %d", h.world, c->world);
        else if (h.rank < 1 || h.rank >= (uint32_t)c->world)
            snprintf(rp.text, sizeof rp.text, "rank %u: the others are 1 to %d", h.rank, c->world - 1);
        else if (k->fd[h.rank] >= 0) snprintf(rp.text, sizeof rp.text, "rank %u has joined already", h.rank);
        else rp.status = 0, snprintf(rp.text, sizeof rp.text, "welcome");
        int sent = send(fd, &rp, sizeof rp, MSG_NOSIGNAL) == (ssize_t)sizeof rp;
        if (rp.status || !sent) {
            snprintf(refused, sizeof refused, "rank %u: %s", h.rank, rp.status ? rp.text : "gone during the handshake");
            close(fd);
            continue;
        }
        k->fd[h.rank] = fd, joined++;
    }
    close(lfd);
    for (int r = 1; r < c->world; r++)
        if (send_head(c, r, OP_GO, 0)) {
            snprintf(err, cap, "job %s: %.200s", id, c->err);
            fail_job(c, err);
            return -1;
        }
    return 0;
}

// Rank r > 0: connects to rank 0 (retrying until t_end), says who it is, and
// waits for the job to start.
static int open_rank(comm *c, const char *id, double t_end, char *err, size_t cap) {
    tcp *k = T(c);
    int e = 0, fd = -1;
    while (fd < 0) {
        struct addrinfo *res;
        if (resolve(k->addr, 0, &res, err, cap)) return -1;
        for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
            fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) {
                e = errno;
                continue;
            }
            tune(fd);
            if (connect(fd, a->ai_addr, a->ai_addrlen) && errno == EINPROGRESS) {
                struct pollfd p = {fd, POLLOUT, 0};
                double left = t_end - now();
                int got = poll(&p, 1, left > 0 ? (int)(left < 5 ? left * 1000 + 1 : 5000) : 0);
                socklen_t sl = sizeof e;
                if (got <= 0) e = ETIMEDOUT;
                else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl)) e = errno;
            } else e = errno;
            if (e) close(fd), fd = -1;
        }
        freeaddrinfo(res);
        if (fd >= 0) break;
        if (now() >= t_end) {
            snprintf(err, cap, "rank 0 at %s not there after %.0f s (%s)", k->addr, k->timeout, strerror(e));
            return -1;
        }
        usleep(50000);
    }
    k->fd[0] = fd;
    hello h = {HELLO_MAGIC, TCP_VERSION, (uint32_t)c->world, (uint32_t)c->rank, ""};
    snprintf(h.id, sizeof h.id, "%s", id);
    reply rp;
    if (send_all(c, 0, &h, sizeof h) || recv_all(c, 0, &rp, sizeof rp, t_end)) {
        snprintf(err, cap, "job %s, rank %d: handshake: %.200s", id, c->rank, c->err);
        return -1;
    }
    rp.text[sizeof rp.text - 1] = 0;
    if (rp.magic != HELLO_MAGIC) {
        snprintf(err, cap, "%s is not rank 0 of an infer job (version %u)", k->addr, TCP_VERSION);
        return -1;
    }
    if (rp.status) {
        snprintf(err, cap, "rank 0 at %s refused rank %d of job %s: %s", k->addr, c->rank, id, rp.text);
        return -1;
    }
    // the others join: rank 0 says go, or why not
    if (wait_fd(c, 0, POLLIN, t_end) || recv_head(c, 0, OP_GO, 0)) {
        snprintf(err, cap, "job %s, rank %d: %.200s", id, c->rank, c->err);
        return -1;
    }
    return 0;
}

int comm_tcp_open(comm *c, const char *addr, const char *id, double timeout_s, char *err, size_t cap) {
    tcp *k = calloc(1, sizeof *k);
    if (!k || (c->rank == 0 && !(k->piece = malloc(sizeof(float) * PIECE)))) {
        free(k);
        snprintf(err, cap, "out of memory");
        return -1;
    }
    for (int r = 0; r < COMM_MAX_RANKS; r++) k->fd[r] = -1;
    k->timeout = timeout_s;
    snprintf(k->addr, sizeof k->addr, "%s", addr);
    c->t = k, c->ops = &tcp_ops;
    double t_end = now() + timeout_s;
    if ((c->rank == 0 ? open_root : open_rank)(c, id, t_end, err, cap)) {
        tcp_close(c);
        c->ops = NULL;
        return -1;
    }
    return 0;
}
