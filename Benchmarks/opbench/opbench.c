/*
 * opbench: a small closed-loop load generator for operations made of several
 * requests, for Benchmarks/run:
 *
 *   -P beanstalk  beanstalkd's put -> reserve -> delete (a job)
 *   -P http       enqueue -> complete over HTTP/1.1 keep-alive (a visitor
 *                 cycle), against Usher or the C baseline
 *
 *   cc -O2 -Wall -pthread -o opbench opbench.c
 *   opbench -P beanstalk -h 127.0.0.1 -p 11300 -t 2 -c 64 -d 5
 *   opbench -P http -p 8080 -q q -t 2 -c 64 -d 5
 *   opbench -P http -p 8081,8082,8083 -q q1,q2,q3 -t 2 -c 64 -d 5
 *
 * -t threads, each an epoll loop over its share of -c connections (like
 * wrk -t2 -c64). Every connection loops through the steps, one request in
 * flight at a time. -p and -q take comma-separated lists: connection k (of
 * all threads, numbered in order) uses the (k mod n)-th port and the
 * (k mod m)-th queue, so the load spreads over several servers and queues.
 *
 *
 *   beanstalk  put 0 0 120 <n>\r\n<body>\r\n   -> INSERTED <id>
 *              reserve-with-timeout 0\r\n      -> RESERVED <id> <n>\r\n<body>\r\n
 *                                                 (TIMED_OUT: reserve again, counted as a retry)
 *              delete <id>\r\n                 -> DELETED
 *   http       POST /v1/queues/<q>/visitors {"payload":{"n":1}}  -> 201, the body's first "id":"<id>"
 *              POST /v1/queues/<q>/visitors/<id>/complete        -> 2xx
 *
 * The reserved job may be one another connection put (beanstalkd hands out
 * the oldest ready job); a connection deletes what it reserved. An answer
 * that is not the expected one counts as a status error and the connection
 * starts its next operation from the first step. When the duration ends no
 * new request is sent; only operations whose last answer arrived by then
 * count.
 *
 * The same client for both protocols, so that beanstalkd and Usher are
 * driven at the same cost per request (wrk runs a Lua script per request and
 * takes more CPU than the servers it drives; on two cores that CPU is taken
 * from the server).
 *
 * Prints (one line each, parsed by Benchmarks/run):
 *   LAT p50_us=.. p90_us=.. p99_us=.. p999_us=.. max_us=.. requests=.. duration_us=.. rps=.. status_errors=.. socket_errors=..
 *   OPS ops=.. ops_per_s=.. op_p50_us=.. op_p99_us=.. step1_p50_us=.. step1_p99_us=.. (each step) retries=..
 * LAT's latencies are per request (command); an op's from its first request
 * being sent to its last answer being read. Latencies are measured closed-loop
 * (a request is sent when the previous answer arrived), with no correction for
 * coordinated omission, unlike wrk's.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Latency histogram: 1 µs buckets below 10 ms, 100 µs buckets up to 1 s. */
#define FINE 10000
#define COARSE 9900
#define BUCKETS (FINE + COARSE + 1)

typedef struct {
    uint64_t count[BUCKETS];
    uint64_t n, max;
} hist;

static void hist_add(hist *h, uint64_t us) {
    size_t b;
    if (us < FINE) b = us;
    else if (us < FINE + (uint64_t)COARSE * 100) b = FINE + (us - FINE) / 100;
    else b = BUCKETS - 1;
    h->count[b]++;
    h->n++;
    if (us > h->max) h->max = us;
}

static void hist_merge(hist *into, const hist *from) {
    for (size_t i = 0; i < BUCKETS; i++) into->count[i] += from->count[i];
    into->n += from->n;
    if (from->max > into->max) into->max = from->max;
}

static uint64_t hist_pct(const hist *h, double p) {
    if (h->n == 0) return 0;
    uint64_t want = (uint64_t)(p / 100.0 * (double)h->n);
    if (want >= h->n) want = h->n - 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < BUCKETS; i++) {
        seen += h->count[i];
        if (seen > want) return i < FINE ? i : FINE + (i - FINE) * 100;
    }
    return h->max;
}

#define MAX_STEPS 3

typedef struct {
    int fd;
    int step;
    uint64_t op_start, req_start;
    char id[136]; /* the job's or the visitor's id, for the next step */
    const char *queue; /* http: the queue this connection uses */
    int port;
    char in[8192];
    size_t in_len;
} conn;

typedef struct {
    int index, nconns;
    conn *conns;
    hist lat, op, steps[MAX_STEPS];
    uint64_t requests, ops, status_errors, socket_errors, retries;
} worker;

/* What a protocol step's answer means. */
enum outcome { NEXT, DONE, RETRY, FAILED };

typedef struct {
    const char *name;
    int default_port, steps;
    /* Writes the current step's request into buf; returns its length. */
    int (*format)(const conn *c, char *buf, size_t cap);
    /* The length of one complete answer at the start of c->in, or 0 for "need more". */
    size_t (*answer_length)(const conn *c);
    /* Reads the answer (c->in, len bytes) of the current step. */
    enum outcome (*advance)(conn *c, size_t len);
} protocol;

static const char *host = "127.0.0.1";
#define MAX_TARGETS 16
static const char *queues[MAX_TARGETS] = {"q"};
static int ports[MAX_TARGETS];
static int nqueues = 1, nports = 1, nthreads = 2, nconns = 64;
static double duration = 5;
static uint64_t deadline_ns;
static const char body[] = "{\"payload\":{\"n\":1}}";

/* ---- beanstalk ---- */

static int beanstalk_format(const conn *c, char *buf, size_t cap) {
    switch (c->step) {
    case 0: return snprintf(buf, cap, "put 0 0 120 %zu\r\n%s\r\n", sizeof body - 1, body);
    case 1: return snprintf(buf, cap, "reserve-with-timeout 0\r\n");
    default: return snprintf(buf, cap, "delete %s\r\n", c->id);
    }
}

/* Through the first "\r\n", plus the body of a RESERVED. */
static size_t beanstalk_answer_length(const conn *c) {
    char *eol = memmem(c->in, c->in_len, "\r\n", 2);
    if (!eol) return 0;
    size_t line = (size_t)(eol - c->in) + 2;
    if (c->step == 1 && c->in_len >= 9 && memcmp(c->in, "RESERVED ", 9) == 0) {
        unsigned long long id, bytes;
        if (sscanf(c->in, "RESERVED %llu %llu", &id, &bytes) != 2) return line;
        size_t total = line + (size_t)bytes + 2;
        return c->in_len >= total ? total : 0;
    }
    return line;
}

static int starts_with(const char *a, size_t len, const char *prefix) {
    size_t n = strlen(prefix);
    return len >= n && memcmp(a, prefix, n) == 0;
}

static enum outcome beanstalk_advance(conn *c, size_t len) {
    unsigned long long id;
    switch (c->step) {
    case 0: return starts_with(c->in, len, "INSERTED ") ? NEXT : FAILED;
    case 1:
        if (sscanf(c->in, "RESERVED %llu", &id) == 1) {
            snprintf(c->id, sizeof c->id, "%llu", id);
            return NEXT;
        }
        /* Another connection took the ready job: ask again. */
        return starts_with(c->in, len, "TIMED_OUT") ? RETRY : FAILED;
    default: return starts_with(c->in, len, "DELETED") ? DONE : FAILED;
    }
}

/* ---- http ---- */

static int http_format(const conn *c, char *buf, size_t cap) {
    if (c->step == 0)
        return snprintf(buf, cap,
                        "POST /v1/queues/%s/visitors HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                        "Content-Length: %zu\r\n\r\n%s",
                        c->queue, host, sizeof body - 1, body);
    return snprintf(buf, cap, "POST /v1/queues/%s/visitors/%s/complete HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n",
                    c->queue, c->id, host);
}

/* The head through "\r\n\r\n" plus Content-Length bytes (no chunked answers here). */
static size_t http_answer_length(const conn *c) {
    char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end) return 0;
    size_t head = (size_t)(end - c->in) + 4;
    size_t length = 0;
    for (const char *p = c->in; p && p < end; p = memchr(p, '\n', (size_t)(end - p))) {
        if (*p == '\n') p++;
        if (strncasecmp(p, "content-length:", 15) == 0) {
            length = (size_t)strtoull(p + 15, NULL, 10);
            break;
        }
    }
    return c->in_len >= head + length ? head + length : 0;
}

static enum outcome http_advance(conn *c, size_t len) {
    if (len < 12 || memcmp(c->in, "HTTP/1.", 7) != 0) return FAILED;
    int status = atoi(c->in + 9);
    if (c->step == 1) return status >= 200 && status < 300 ? DONE : FAILED;
    if (status != 201) return FAILED;
    const char *key = memmem(c->in, len, "\"id\":\"", 6);
    if (!key) return FAILED;
    key += 6;
    const char *close = memchr(key, '"', len - (size_t)(key - c->in));
    if (!close || (size_t)(close - key) >= sizeof c->id) return FAILED;
    memcpy(c->id, key, (size_t)(close - key));
    c->id[close - key] = 0;
    return NEXT;
}

static const protocol protocols[] = {
    {"beanstalk", 11300, 3, beanstalk_format, beanstalk_answer_length, beanstalk_advance},
    {"http", 8080, 2, http_format, http_answer_length, http_advance},
};
static const protocol *proto = &protocols[0];

/* ---- the loop ---- */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int send_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

static int send_request(worker *w, conn *c) {
    char buf[512];
    int len = proto->format(c, buf, sizeof buf);
    c->req_start = now_ns();
    if (c->step == 0) c->op_start = c->req_start;
    if (len < 0 || (size_t)len >= sizeof buf || send_all(c->fd, buf, (size_t)len) < 0) {
        w->socket_errors++;
        return -1;
    }
    return 0;
}

/* Handles the answer at the start of c->in; returns 1 to send the next request, 0 to stop. */
static int handle(worker *w, conn *c, size_t len) {
    uint64_t t = now_ns();
    uint64_t us = (t - c->req_start) / 1000;
    w->requests++;
    hist_add(&w->lat, us);
    hist_add(&w->steps[c->step], us);
    switch (proto->advance(c, len)) {
    case NEXT: c->step++; break;
    case RETRY: w->retries++; break;
    case DONE:
        w->ops++;
        hist_add(&w->op, (t - c->op_start) / 1000);
        c->step = 0;
        break;
    case FAILED:
        w->status_errors++;
        c->step = 0;
        break;
    }
    return t < deadline_ns;
}

static int connect_one(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        close(fd);
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void *run(void *arg) {
    worker *w = arg;
    int ep = epoll_create1(0);
    int live = 0;
    for (int i = 0; i < w->nconns; i++) {
        conn *c = &w->conns[i];
        c->fd = connect_one(c->port);
        if (c->fd < 0) {
            w->socket_errors++;
            continue;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
        c->step = 0;
        if (send_request(w, c) == 0) live++;
    }
    struct epoll_event evs[64];
    while (live > 0) {
        uint64_t t = now_ns();
        /* Wait at most past the deadline by 1 s for answers in flight. */
        if (t > deadline_ns + 1000000000ull) break;
        int n = epoll_wait(ep, evs, 64, 100);
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            /* One byte kept for a terminating NUL (sscanf, strtoull read the answers). */
            ssize_t r = recv(c->fd, c->in + c->in_len, sizeof c->in - 1 - c->in_len, 0);
            if (r <= 0) {
                if (r < 0 && errno == EINTR) continue;
                w->socket_errors++;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                live--;
                continue;
            }
            c->in_len += (size_t)r;
            c->in[c->in_len] = 0;
            size_t len;
            while ((len = proto->answer_length(c)) > 0) {
                int more = handle(w, c, len);
                memmove(c->in, c->in + len, c->in_len - len);
                c->in_len -= len;
                c->in[c->in_len] = 0;
                if (more && send_request(w, c) == 0) continue;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                live--;
                break;
            }
            if (c->in_len == sizeof c->in - 1) { /* an answer larger than the buffer */
                w->socket_errors++;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                live--;
            }
        }
    }
    for (int i = 0; i < w->nconns; i++)
        if (w->conns[i].fd >= 0) close(w->conns[i].fd);
    close(ep);
    return NULL;
}

/* Splits "a,b,c" (modified in place) into strings or port numbers; returns the count, 0 if too many. */
static int split_list(char *text, const char **strings, int *numbers) {
    int n = 0;
    for (char *item = strtok(text, ","); item; item = strtok(NULL, ",")) {
        if (n == MAX_TARGETS) return 0;
        if (strings) strings[n] = item;
        if (numbers) numbers[n] = atoi(item);
        n++;
    }
    return n;
}

int main(int argc, char **argv) {
    int opt;
    while ((opt = getopt(argc, argv, "P:h:p:q:t:c:d:")) != -1) {
        switch (opt) {
        case 'P':
            proto = NULL;
            for (size_t i = 0; i < sizeof protocols / sizeof protocols[0]; i++)
                if (strcmp(optarg, protocols[i].name) == 0) proto = &protocols[i];
            if (!proto) {
                fprintf(stderr, "opbench: unknown protocol %s (beanstalk, http)\n", optarg);
                return 2;
            }
            break;
        case 'h': host = optarg; break;
        case 'p': nports = split_list(optarg, NULL, ports); break;
        case 'q': nqueues = split_list(optarg, queues, NULL); break;
        case 't': nthreads = atoi(optarg); break;
        case 'c': nconns = atoi(optarg); break;
        case 'd': duration = atof(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-P beanstalk|http] [-h host] [-p port[,port...]] [-q queue[,queue...]] [-t threads] [-c connections] [-d seconds]\n",
                    argv[0]);
            return 2;
        }
    }
    if (nports < 1 || nqueues < 1) {
        fprintf(stderr, "opbench: -p and -q take 1 to %d comma-separated values\n", MAX_TARGETS);
        return 2;
    }
    for (int i = 0; i < nports; i++)
        if (ports[i] == 0) ports[i] = proto->default_port;
    if (nthreads < 1 || nconns < nthreads || duration <= 0) {
        fprintf(stderr, "opbench: need threads >= 1, connections >= threads, duration > 0\n");
        return 2;
    }
    worker *ws = calloc((size_t)nthreads, sizeof *ws);
    pthread_t *tids = calloc((size_t)nthreads, sizeof *tids);
    uint64_t start = now_ns();
    deadline_ns = start + (uint64_t)(duration * 1e9);
    for (int i = 0, first = 0; i < nthreads; i++) {
        ws[i].index = i;
        ws[i].nconns = nconns / nthreads + (i < nconns % nthreads);
        ws[i].conns = calloc((size_t)ws[i].nconns, sizeof(conn));
        for (int j = 0; j < ws[i].nconns; j++) {
            ws[i].conns[j].port = ports[(first + j) % nports];
            ws[i].conns[j].queue = queues[(first + j) % nqueues];
        }
        first += ws[i].nconns;
        pthread_create(&tids[i], NULL, run, &ws[i]);
    }
    worker *all = calloc(1, sizeof *all);
    for (int i = 0; i < nthreads; i++) {
        pthread_join(tids[i], NULL);
        hist_merge(&all->lat, &ws[i].lat);
        hist_merge(&all->op, &ws[i].op);
        for (int s = 0; s < MAX_STEPS; s++) hist_merge(&all->steps[s], &ws[i].steps[s]);
        all->requests += ws[i].requests;
        all->ops += ws[i].ops;
        all->status_errors += ws[i].status_errors;
        all->socket_errors += ws[i].socket_errors;
        all->retries += ws[i].retries;
    }
    /* Rates over the nominal duration: answers after the deadline are few
     * (one request per connection at most). */
    double secs = duration;
    printf("LAT p50_us=%llu p90_us=%llu p99_us=%llu p999_us=%llu max_us=%llu requests=%llu duration_us=%llu rps=%.1f status_errors=%llu socket_errors=%llu\n",
           (unsigned long long)hist_pct(&all->lat, 50), (unsigned long long)hist_pct(&all->lat, 90),
           (unsigned long long)hist_pct(&all->lat, 99), (unsigned long long)hist_pct(&all->lat, 99.9),
           (unsigned long long)all->lat.max, (unsigned long long)all->requests,
           (unsigned long long)(secs * 1e6), (double)all->requests / secs,
           (unsigned long long)all->status_errors, (unsigned long long)all->socket_errors);
    printf("OPS ops=%llu ops_per_s=%.1f op_p50_us=%llu op_p99_us=%llu", (unsigned long long)all->ops,
           (double)all->ops / secs, (unsigned long long)hist_pct(&all->op, 50), (unsigned long long)hist_pct(&all->op, 99));
    for (int s = 0; s < proto->steps; s++)
        printf(" step%d_p50_us=%llu step%d_p99_us=%llu", s + 1, (unsigned long long)hist_pct(&all->steps[s], 50), s + 1,
               (unsigned long long)hist_pct(&all->steps[s], 99));
    printf(" retries=%llu\n", (unsigned long long)all->retries);
    return all->requests > 0 ? 0 : 1;
}
