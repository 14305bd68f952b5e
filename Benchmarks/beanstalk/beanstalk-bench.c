/*
 * beanstalk-bench: a small load generator for beanstalkd, the counterpart of
 * wrk's enqueue+complete cycle for Benchmarks/run.
 *
 *   cc -O2 -Wall -pthread -o beanstalk-bench beanstalk-bench.c
 *   beanstalk-bench -h 127.0.0.1 -p 11300 -t 2 -c 64 -d 5
 *
 * -t threads, each an epoll loop over its share of -c connections (like
 * wrk -t2 -c64). Every connection loops, one command in flight at a time:
 *
 *   put 0 0 120 <n>\r\n<body>\r\n   -> INSERTED <id>
 *   reserve-with-timeout 0\r\n      -> RESERVED <id> <n>\r\n<body>\r\n  (TIMED_OUT: reserve again)
 *   delete <id>\r\n                 -> DELETED
 *
 * A job is one put + reserve + delete. The reserved job may be one another
 * connection put (beanstalkd hands out the oldest ready job); a connection
 * deletes what it reserved. When the duration ends no new command is sent;
 * only jobs whose delete was answered by then count.
 *
 * Prints (one line each, parsed by Benchmarks/run):
 *   LAT p50_us=.. p90_us=.. p99_us=.. p999_us=.. max_us=.. requests=.. duration_us=.. rps=.. status_errors=.. socket_errors=..
 *   JOBS jobs=.. jobs_per_s=.. job_p50_us=.. job_p99_us=.. put_p50_us=.. put_p99_us=.. reserve_p50_us=.. reserve_p99_us=.. delete_p50_us=.. delete_p99_us=.. timed_out=..
 * LAT's latencies are per command (request); JOBS's job_* from the put being
 * sent to the DELETED being read. Latencies are measured closed-loop (a
 * command is sent when the previous answer arrived), with no correction for
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

enum { ST_PUT, ST_RESERVE, ST_DELETE };

typedef struct {
    int fd;
    int state;
    uint64_t job_start, cmd_start;
    unsigned long long id;
    char in[4096];
    size_t in_len;
} conn;

typedef struct {
    int index, nconns;
    conn *conns;
    hist lat, job, put, reserve, del;
    uint64_t requests, jobs, status_errors, socket_errors, timed_out;
} worker;

static const char *host = "127.0.0.1";
static int port = 11300, nthreads = 2, nconns = 64;
static double duration = 5;
static uint64_t deadline_ns;
static const char body[] = "{\"payload\":{\"n\":1}}";

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

static int send_cmd(worker *w, conn *c) {
    char buf[256];
    int len;
    switch (c->state) {
    case ST_PUT:
        len = snprintf(buf, sizeof buf, "put 0 0 120 %zu\r\n%s\r\n", sizeof body - 1, body);
        break;
    case ST_RESERVE:
        len = snprintf(buf, sizeof buf, "reserve-with-timeout 0\r\n");
        break;
    default:
        len = snprintf(buf, sizeof buf, "delete %llu\r\n", c->id);
        break;
    }
    c->cmd_start = now_ns();
    if (c->state == ST_PUT) c->job_start = c->cmd_start;
    if (send_all(c->fd, buf, (size_t)len) < 0) {
        w->socket_errors++;
        return -1;
    }
    return 0;
}

/* One complete answer in c->in (through its first "\r\n", plus the body of a
 * RESERVED): returns its length, or 0 when more bytes are needed. */
static size_t answer_length(conn *c) {
    char *eol = memmem(c->in, c->in_len, "\r\n", 2);
    if (!eol) return 0;
    size_t line = (size_t)(eol - c->in) + 2;
    if (c->state == ST_RESERVE && strncmp(c->in, "RESERVED ", 9) == 0) {
        unsigned long long id, bytes;
        if (sscanf(c->in, "RESERVED %llu %llu", &id, &bytes) != 2) return line;
        size_t total = line + (size_t)bytes + 2;
        return c->in_len >= total ? total : 0;
    }
    return line;
}

/* Handles one answer; returns 1 to send the next command, 0 to stop this connection. */
static int handle(worker *w, conn *c, const char *a) {
    uint64_t t = now_ns();
    uint64_t us = (t - c->cmd_start) / 1000;
    w->requests++;
    hist_add(&w->lat, us);
    switch (c->state) {
    case ST_PUT:
        hist_add(&w->put, us);
        if (sscanf(a, "INSERTED %llu", &c->id) == 1) {
            c->state = ST_RESERVE;
        } else {
            w->status_errors++;
        }
        break;
    case ST_RESERVE:
        hist_add(&w->reserve, us);
        if (sscanf(a, "RESERVED %llu", &c->id) == 1) {
            c->state = ST_DELETE;
        } else if (strncmp(a, "TIMED_OUT", 9) == 0) {
            w->timed_out++; /* another connection took the ready job: ask again */
        } else {
            w->status_errors++;
        }
        break;
    default:
        hist_add(&w->del, us);
        if (strncmp(a, "DELETED", 7) == 0) {
            w->jobs++;
            hist_add(&w->job, (t - c->job_start) / 1000);
        } else {
            w->status_errors++;
        }
        c->state = ST_PUT;
        break;
    }
    return t < deadline_ns;
}

static int connect_one(void) {
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
        c->fd = connect_one();
        if (c->fd < 0) {
            w->socket_errors++;
            continue;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
        c->state = ST_PUT;
        if (send_cmd(w, c) == 0) live++;
    }
    struct epoll_event evs[64];
    while (live > 0) {
        uint64_t t = now_ns();
        /* Wait at most past the deadline by 1 s for answers in flight. */
        if (t > deadline_ns + 1000000000ull) break;
        int n = epoll_wait(ep, evs, 64, 100);
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            ssize_t r = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, 0);
            if (r <= 0) {
                if (r < 0 && errno == EINTR) continue;
                w->socket_errors++;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                live--;
                continue;
            }
            c->in_len += (size_t)r;
            size_t len;
            while ((len = answer_length(c)) > 0) {
                char line[256];
                size_t l = len < sizeof line - 1 ? len : sizeof line - 1;
                memcpy(line, c->in, l);
                line[l] = 0;
                memmove(c->in, c->in + len, c->in_len - len);
                c->in_len -= len;
                if (handle(w, c, line) && send_cmd(w, c) == 0) continue;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                live--;
                break;
            }
        }
    }
    for (int i = 0; i < w->nconns; i++)
        if (w->conns[i].fd >= 0) close(w->conns[i].fd);
    close(ep);
    return NULL;
}

int main(int argc, char **argv) {
    int opt;
    while ((opt = getopt(argc, argv, "h:p:t:c:d:")) != -1) {
        switch (opt) {
        case 'h': host = optarg; break;
        case 'p': port = atoi(optarg); break;
        case 't': nthreads = atoi(optarg); break;
        case 'c': nconns = atoi(optarg); break;
        case 'd': duration = atof(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-h host] [-p port] [-t threads] [-c connections] [-d seconds]\n", argv[0]);
            return 2;
        }
    }
    if (nthreads < 1 || nconns < nthreads || duration <= 0) {
        fprintf(stderr, "beanstalk-bench: need threads >= 1, connections >= threads, duration > 0\n");
        return 2;
    }
    worker *ws = calloc((size_t)nthreads, sizeof *ws);
    pthread_t *tids = calloc((size_t)nthreads, sizeof *tids);
    uint64_t start = now_ns();
    deadline_ns = start + (uint64_t)(duration * 1e9);
    for (int i = 0; i < nthreads; i++) {
        ws[i].index = i;
        ws[i].nconns = nconns / nthreads + (i < nconns % nthreads);
        ws[i].conns = calloc((size_t)ws[i].nconns, sizeof(conn));
        pthread_create(&tids[i], NULL, run, &ws[i]);
    }
    worker *all = calloc(1, sizeof *all);
    for (int i = 0; i < nthreads; i++) {
        pthread_join(tids[i], NULL);
        hist_merge(&all->lat, &ws[i].lat);
        hist_merge(&all->job, &ws[i].job);
        hist_merge(&all->put, &ws[i].put);
        hist_merge(&all->reserve, &ws[i].reserve);
        hist_merge(&all->del, &ws[i].del);
        all->requests += ws[i].requests;
        all->jobs += ws[i].jobs;
        all->status_errors += ws[i].status_errors;
        all->socket_errors += ws[i].socket_errors;
        all->timed_out += ws[i].timed_out;
    }
    /* Rates over the nominal duration: answers after the deadline are few
     * (one command per connection at most) and are not counted in jobs. */
    double secs = duration;
    printf("LAT p50_us=%llu p90_us=%llu p99_us=%llu p999_us=%llu max_us=%llu requests=%llu duration_us=%llu rps=%.1f status_errors=%llu socket_errors=%llu\n",
           (unsigned long long)hist_pct(&all->lat, 50), (unsigned long long)hist_pct(&all->lat, 90),
           (unsigned long long)hist_pct(&all->lat, 99), (unsigned long long)hist_pct(&all->lat, 99.9),
           (unsigned long long)all->lat.max, (unsigned long long)all->requests,
           (unsigned long long)(secs * 1e6), (double)all->requests / secs,
           (unsigned long long)all->status_errors, (unsigned long long)all->socket_errors);
    printf("JOBS jobs=%llu jobs_per_s=%.1f job_p50_us=%llu job_p99_us=%llu put_p50_us=%llu put_p99_us=%llu "
           "reserve_p50_us=%llu reserve_p99_us=%llu delete_p50_us=%llu delete_p99_us=%llu timed_out=%llu\n",
           (unsigned long long)all->jobs, (double)all->jobs / secs,
           (unsigned long long)hist_pct(&all->job, 50), (unsigned long long)hist_pct(&all->job, 99),
           (unsigned long long)hist_pct(&all->put, 50), (unsigned long long)hist_pct(&all->put, 99),
           (unsigned long long)hist_pct(&all->reserve, 50), (unsigned long long)hist_pct(&all->reserve, 99),
           (unsigned long long)hist_pct(&all->del, 50), (unsigned long long)hist_pct(&all->del, 99),
           (unsigned long long)all->timed_out);
    return all->requests > 0 ? 0 : 1;
}
