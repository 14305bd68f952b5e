/*
 * longpoll: park N long-polls on an HTTP server, release them with one
 * request, and measure how long each parked request takes to be answered.
 *
 * One thread, one epoll loop, non-blocking sockets. Every connection is a
 * keep-alive HTTP/1.1 connection to HOST:PORT carrying one long-poll request.
 * When the server reports that they are all parked (a metric read from a URL,
 * or simply a fixed settle time), the release request is sent on a separate
 * connection; for every parked connection the time from writing the release
 * to receiving the last byte of its response is recorded.
 *
 *   longpoll -p 8080 -n 10000 -u '/v1/machines/m?wait=30' \
 *            -r 'POST /v1/machines/m/events/prepare' \
 *            -W /metrics -M usher_http_requests_in_flight -P SERVER_PID
 *
 * Options:
 *   -H HOST      IPv4 address [127.0.0.1]
 *   -p PORT      port [8080]
 *   -n N         parked connections [10000]
 *   -m METHOD    long-poll method [GET]
 *   -u PATH      long-poll path (required); "%d" is replaced by the connection index
 *   -b BODY      long-poll body (JSON; "%d" replaced too) [none]
 *   -r 'M PATH'  release request, method and path (required)
 *   -R BODY      release body [none]
 *   -W PATH      URL polled (GET, one connection each time) until metric -M >= N [none]
 *   -M NAME      metric line prefix in the -W answer [usher_http_requests_in_flight]
 *   -s SECONDS   settle time after all are parked (or, without -W, after all are sent) [1]
 *   -P PID       read VmRSS/Threads of PID before the long-polls, parked, and after release
 *   -t SECONDS   give up after this long in any phase [60]
 *   -c N         connects in progress at once [256]
 *   -2           after the release, send the long-poll again on every answered
 *                connection, wait until parked again and sample -P (the steady
 *                state of a client that polls again: its connection has served
 *                a response); those second long-polls are left to the server
 *   -O BODY      body of the second long-polls [the -b body]
 *
 * Output: key=value lines (parse-friendly), then a summary.
 * Build: cc -O2 -o longpoll longpoll.c  (see Makefile)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum state { ST_IDLE, ST_CONNECTING, ST_SENDING, ST_WAITING, ST_DONE, ST_FAILED };

struct conn {
    int fd;
    enum state st;
    char *req;          /* the request bytes */
    size_t req_len, req_off;
    char *buf;          /* response so far */
    size_t len, cap;
    int status;
    double done_at;     /* monotonic seconds, when the response was complete */
};

static const char *host = "127.0.0.1";
static int port = 8080;
static int n = 10000;
static const char *lp_method = "GET";
static const char *lp_path;
static const char *lp_body;
static char rel_method[16];
static const char *rel_path;
static const char *rel_body;
static const char *watch_path;
static const char *metric = "usher_http_requests_in_flight";
static double settle = 1;
static int server_pid;
static double timeout_s = 60;
static int max_connecting = 256;
static int repark;
static const char *repark_body;

static struct sockaddr_in addr;
static int ep;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* "%d" in tmpl replaced by i (every occurrence). */
static char *expand(const char *tmpl, int i) {
    if (!tmpl) return NULL;
    char num[16];
    int nl = snprintf(num, sizeof num, "%d", i);
    size_t cap = strlen(tmpl) * 2 + 32, len = 0;
    char *out = malloc(cap);
    for (const char *p = tmpl; *p; p++) {
        if (len + nl + 2 >= cap) out = realloc(out, cap *= 2);
        if (p[0] == '%' && p[1] == 'd') {
            memcpy(out + len, num, nl);
            len += nl;
            p++;
        } else {
            out[len++] = *p;
        }
    }
    out[len] = 0;
    return out;
}

static char *build_request(const char *method, const char *path, const char *body, int keep_alive, size_t *len) {
    size_t blen = body ? strlen(body) : 0;
    size_t cap = strlen(path) + blen + 256;
    char *r = malloc(cap);
    int h = snprintf(r, cap,
                     "%s %s HTTP/1.1\r\nHost: %s:%d\r\n%s%s",
                     method, path, host, port, keep_alive ? "" : "Connection: close\r\n",
                     body ? "Content-Type: application/json\r\n" : "");
    if (body) h += snprintf(r + h, cap - h, "Content-Length: %zu\r\n", blen);
    h += snprintf(r + h, cap - h, "\r\n");
    if (body) memcpy(r + h, body, blen);
    *len = h + blen;
    return r;
}

static int open_socket(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS) die("connect");
    return fd;
}

/* 1 when buf holds a complete response (Content-Length or chunked), status set. */
static int response_complete(const char *buf, size_t len, int *status) {
    const char *end = memmem(buf, len, "\r\n\r\n", 4);
    if (!end) return 0;
    size_t head = end - buf + 4;
    if (len >= 12 && !memcmp(buf, "HTTP/1.", 7)) *status = atoi(buf + 9);
    const char *cl = memmem(buf, head, "\nContent-Length:", 16);
    if (!cl) cl = memmem(buf, head, "\ncontent-length:", 16);
    if (cl) return len >= head + (size_t)strtoul(cl + 16, NULL, 10);
    if (memmem(buf, head, "chunked", 7)) return memmem(buf + head, len - head, "0\r\n\r\n", 5) != NULL;
    return 1; /* no body (e.g. 204) */
}

/* Reads what is there; 1 when the response is complete, -1 on EOF/error before that. */
static int read_some(struct conn *c) {
    for (;;) {
        if (c->cap - c->len < 4096) {
            c->cap = c->cap ? c->cap * 2 : 8192;
            c->buf = realloc(c->buf, c->cap);
        }
        ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len - 1);
        if (r > 0) {
            c->len += r;
            if (response_complete(c->buf, c->len, &c->status)) return 1;
            continue;
        }
        if (r == 0) return -1;
        if (errno == EAGAIN) return 0;
        if (errno == EINTR) continue;
        return -1;
    }
}

static int write_some(struct conn *c) {
    while (c->req_off < c->req_len) {
        ssize_t w = write(c->fd, c->req + c->req_off, c->req_len - c->req_off);
        if (w > 0) { c->req_off += w; continue; }
        if (errno == EAGAIN) return 0;
        if (errno == EINTR) continue;
        return -1;
    }
    return 1;
}

/* One short blocking request on its own connection; the response in out (NUL-terminated). */
static int simple_request(const char *method, const char *path, const char *body, char **out, double *sent_at) {
    struct conn c = {0};
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c.fd < 0) return -1;
    int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c.fd, (struct sockaddr *)&addr, sizeof addr) < 0) { close(c.fd); return -1; }
    c.req = build_request(method, path, body, 0, &c.req_len);
    if (sent_at) *sent_at = now();
    if (write_some(&c) != 1) { close(c.fd); free(c.req); return -1; }
    for (;;) {
        if (c.cap - c.len < 4096) { c.cap = c.cap ? c.cap * 2 : 8192; c.buf = realloc(c.buf, c.cap); }
        ssize_t r = read(c.fd, c.buf + c.len, c.cap - c.len - 1);
        if (r <= 0) break;
        c.len += r;
        if (response_complete(c.buf, c.len, &c.status)) break;
    }
    close(c.fd);
    free(c.req);
    if (c.buf) c.buf[c.len] = 0;
    if (out) *out = c.buf; else free(c.buf);
    return c.status;
}

static double metric_value(void) {
    char *body = NULL;
    if (simple_request("GET", watch_path, NULL, &body, NULL) != 200) { free(body); return -1; }
    double v = -1;
    size_t ml = strlen(metric);
    for (char *line = body; line && *line; ) {
        char *next = strchr(line, '\n');
        if (!strncmp(line, metric, ml) && (line[ml] == ' ' || line[ml] == '{')) {
            if (next) *next = 0;
            char *sp = strrchr(line, ' ');
            v = sp ? atof(sp + 1) : -1;
            break;
        }
        line = next ? next + 1 : NULL;
    }
    free(body);
    return v;
}

static void proc_sample(const char *label) {
    if (!server_pid) return;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", server_pid);
    FILE *f = fopen(path, "r");
    if (!f) return;
    long rss = -1, threads = -1;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "VmRSS:", 6)) rss = atol(line + 6);
        if (!strncmp(line, "Threads:", 8)) threads = atol(line + 8);
    }
    fclose(f);
    /* utime + stime of all threads (fields 14 and 15 of /proc/PID/stat), after "(comm) ". */
    double cpu_ms = -1;
    snprintf(path, sizeof path, "/proc/%d/stat", server_pid);
    if ((f = fopen(path, "r"))) {
        char stat[1024];
        size_t got = fread(stat, 1, sizeof stat - 1, f);
        stat[got] = 0;
        fclose(f);
        char *p = strrchr(stat, ')');
        unsigned long ut = 0, st = 0;
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
            cpu_ms = (ut + st) * 1000.0 / sysconf(_SC_CLK_TCK);
    }
    printf("%s_rss_kib=%ld\n%s_threads=%ld\n%s_cpu_ms=%.0f\n", label, rss, label, threads, label, cpu_ms);
    fflush(stdout);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void usage(void) {
    fprintf(stderr, "usage: longpoll -u PATH -r 'METHOD PATH' [-R BODY] [-n N] [-p PORT] [-H HOST] [-m METHOD] [-b BODY]\n"
                    "                [-W METRICS_PATH] [-M METRIC] [-s SETTLE] [-P PID] [-t TIMEOUT] [-c CONNECTING]\n");
    exit(2);
}

int main(int argc, char **argv) {
    int opt;
    const char *release = NULL;
    while ((opt = getopt(argc, argv, "H:p:n:m:u:b:r:R:W:M:s:P:t:c:2O:")) != -1) {
        switch (opt) {
        case 'H': host = optarg; break;
        case 'p': port = atoi(optarg); break;
        case 'n': n = atoi(optarg); break;
        case 'm': lp_method = optarg; break;
        case 'u': lp_path = optarg; break;
        case 'b': lp_body = optarg; break;
        case 'r': release = optarg; break;
        case 'R': rel_body = optarg; break;
        case 'W': watch_path = optarg; break;
        case 'M': metric = optarg; break;
        case 's': settle = atof(optarg); break;
        case 'P': server_pid = atoi(optarg); break;
        case 't': timeout_s = atof(optarg); break;
        case 'c': max_connecting = atoi(optarg); break;
        case '2': repark = 1; break;
        case 'O': repark_body = optarg; break;
        default: usage();
        }
    }
    if (!lp_path || !release || n < 1) usage();
    const char *sp = strchr(release, ' ');
    if (!sp || sp - release >= (long)sizeof rel_method) usage();
    memcpy(rel_method, release, sp - release);
    rel_path = sp + 1;

    /* Enough descriptors for N connections and a few more (root may raise the hard limit). */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rlim_t want = (rlim_t)n + 64;
    if (rl.rlim_cur < want) {
        rl.rlim_cur = want;
        if (rl.rlim_max < want) rl.rlim_max = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) die("setrlimit(RLIMIT_NOFILE)");
    }

    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) { fprintf(stderr, "bad host %s\n", host); return 2; }

    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    struct conn *conns = calloc(n, sizeof *conns);
    proc_sample("before");

    /* Phase 1: connect and send, at most max_connecting handshakes at once. */
    double t0 = now(), deadline = t0 + timeout_s;
    int next = 0, connecting = 0, sent = 0, early = 0, failed = 0;
    struct epoll_event evs[1024];
    while (sent + early + failed < n) {
        while (next < n && connecting < max_connecting) {
            struct conn *c = &conns[next];
            char *path = expand(lp_path, next), *body = expand(lp_body, next);
            c->req = build_request(lp_method, path, body, 1, &c->req_len);
            free(path);
            free(body);
            c->fd = open_socket();
            c->st = ST_CONNECTING;
            struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP, .data.u32 = next};
            if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) die("epoll_ctl");
            next++;
            connecting++;
        }
        if (now() > deadline) { fprintf(stderr, "longpoll: timeout while connecting (%d sent)\n", sent); break; }
        int k = epoll_wait(ep, evs, 1024, 100);
        for (int i = 0; i < k; i++) {
            struct conn *c = &conns[evs[i].data.u32];
            if (c->st == ST_CONNECTING || c->st == ST_SENDING) {
                if (evs[i].events & (EPOLLERR | EPOLLHUP)) {
                    c->st = ST_FAILED; failed++; connecting--;
                    continue;
                }
                c->st = ST_SENDING;
                int w = write_some(c);
                if (w < 0) { c->st = ST_FAILED; failed++; connecting--; continue; }
                if (w == 1) {
                    c->st = ST_WAITING; sent++; connecting--;
                    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = evs[i].data.u32};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
            } else if (c->st == ST_WAITING) {
                /* Answered before the release: counted apart. */
                int r = read_some(c);
                if (r != 0) { c->st = r > 0 ? ST_DONE : ST_FAILED; c->done_at = -1; sent--; if (r > 0) early++; else failed++; }
            }
        }
    }
    double t_sent = now();
    printf("sent=%d\nconnect_failed=%d\nsend_seconds=%.3f\n", sent, failed, t_sent - t0);
    fflush(stdout);

    /* Phase 2: wait until the server reports them parked (early answers still read). */
    double parked = -1;
    int parked_ok = 0;
    for (;;) {
        int k = epoll_wait(ep, evs, 1024, 50);
        for (int i = 0; i < k; i++) {
            struct conn *c = &conns[evs[i].data.u32];
            if (c->st != ST_WAITING) continue;
            int r = read_some(c);
            if (r != 0) { c->st = r > 0 ? ST_DONE : ST_FAILED; c->done_at = -1; if (r > 0) early++; else failed++; }
        }
        if (!watch_path) { parked_ok = 1; break; }
        parked = metric_value();
        if (parked >= n - early - failed) { parked_ok = 1; break; }
        if (now() > deadline + timeout_s) break;
    }
    printf("parked_seconds=%.3f\nparked_metric=%.0f\nparked_ok=%d\n", now() - t0, parked, parked_ok);
    fflush(stdout);
    double settle_end = now() + settle;
    while (now() < settle_end) {
        int k = epoll_wait(ep, evs, 1024, 50);
        for (int i = 0; i < k; i++) {
            struct conn *c = &conns[evs[i].data.u32];
            if (c->st != ST_WAITING) continue;
            int r = read_some(c);
            if (r != 0) { c->st = r > 0 ? ST_DONE : ST_FAILED; c->done_at = -1; if (r > 0) early++; else failed++; }
        }
    }
    proc_sample("parked");

    /* Phase 3: release, then time every answer. */
    int waiting = 0;
    for (int i = 0; i < n; i++) waiting += conns[i].st == ST_WAITING;
    struct conn rel = {0};
    rel.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(rel.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(rel.fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect (release)");
    fcntl(rel.fd, F_SETFL, O_NONBLOCK);
    rel.req = build_request(rel_method, rel_path, rel_body, 0, &rel.req_len);
    struct epoll_event rev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = UINT32_MAX};
    epoll_ctl(ep, EPOLL_CTL_ADD, rel.fd, &rev);
    double t_rel = now();
    if (write_some(&rel) != 1) die("write (release)");
    double rel_done = -1;
    int answered = 0;
    deadline = t_rel + timeout_s;
    while (answered < waiting && now() < deadline) {
        int k = epoll_wait(ep, evs, 1024, 100);
        double t = now();
        for (int i = 0; i < k; i++) {
            if (evs[i].data.u32 == UINT32_MAX) {
                if (rel_done < 0) {
                    int r = read_some(&rel);
                    if (r != 0) { rel_done = t; epoll_ctl(ep, EPOLL_CTL_DEL, rel.fd, NULL); }
                }
                continue;
            }
            struct conn *c = &conns[evs[i].data.u32];
            if (c->st != ST_WAITING) continue;
            int r = read_some(c);
            if (r > 0) { c->st = ST_DONE; c->done_at = now(); answered++; }
            else if (r < 0) { c->st = ST_FAILED; answered++; }
        }
    }
    while (rel_done < 0 && now() < deadline + 1) {
        int r = read_some(&rel);
        if (r != 0) { rel_done = now(); break; }
        usleep(1000);
    }
    proc_sample("released");

    /* Report. */
    double *lat = malloc(sizeof(double) * (n + 1));
    int m = 0, timed_out = 0, lost = 0;
    int codes[600] = {0};
    for (int i = 0; i < n; i++) {
        struct conn *c = &conns[i];
        if (c->st == ST_DONE && c->done_at >= 0) {
            lat[m++] = c->done_at - t_rel;
            if (c->status > 0 && c->status < 600) codes[c->status]++;
        } else if (c->st == ST_WAITING) {
            timed_out++;
        } else if (c->st == ST_FAILED) {
            lost++;
        }
    }
    qsort(lat, m, sizeof *lat, cmp_double);
    printf("release_status=%d\nrelease_response_ms=%.1f\n", rel.status, rel_done < 0 ? -1 : (rel_done - t_rel) * 1e3);
    printf("early=%d\nanswered=%d\nunanswered=%d\nfailed=%d\n", early, m, timed_out, lost + failed);
    for (int s = 0; s < 600; s++) if (codes[s]) printf("status_%d=%d\n", s, codes[s]);
    if (m > 0) {
        printf("first_ms=%.1f\np50_ms=%.1f\np99_ms=%.1f\nmax_ms=%.1f\n",
               lat[0] * 1e3, lat[m / 2] * 1e3, lat[(int)(m * 0.99) < m ? (int)(m * 0.99) : m - 1] * 1e3, lat[m - 1] * 1e3);
    }
    fflush(stdout);

    /* Phase 4 (-2): the same long-poll again on every answered connection. */
    if (repark) {
        int again = 0;
        double before_metric = watch_path ? metric_value() : 0;
        for (int i = 0; i < n; i++) {
            struct conn *c = &conns[i];
            if (c->st != ST_DONE || c->done_at < 0) continue;
            free(c->req);
            char *path = expand(lp_path, i), *body = expand(repark_body ? repark_body : lp_body, i);
            c->req = build_request(lp_method, path, body, 1, &c->req_len);
            free(path);
            free(body);
            c->req_off = 0;
            c->len = 0;
            c->status = 0;
            if (write_some(c) == 1) { c->st = ST_WAITING; again++; }
        }
        double t1 = now(), got = -1;
        int ok = !watch_path;
        while (watch_path && now() < t1 + timeout_s) {
            int k = epoll_wait(ep, evs, 1024, 50);
            for (int i = 0; i < k; i++) {
                if (evs[i].data.u32 == UINT32_MAX) continue;
                struct conn *c = &conns[evs[i].data.u32];
                if (c->st != ST_WAITING) continue;
                int r = read_some(c);
                if (r != 0) { c->st = r > 0 ? ST_DONE : ST_FAILED; again--; }
            }
            got = metric_value();
            if (got - (before_metric > 0 ? before_metric : 0) >= again) { ok = 1; break; }
        }
        usleep((useconds_t)(settle * 1e6));
        printf("reparked=%d\nreparked_metric=%.0f\nreparked_ok=%d\nreparked_seconds=%.3f\n", again, got, ok, now() - t1);
        proc_sample("reparked");
    }
    for (int i = 0; i < n; i++) {
        if (conns[i].fd > 0) close(conns[i].fd);
        free(conns[i].req);
        free(conns[i].buf);
    }
    close(rel.fd);
    return (timed_out || lost || failed || m == 0) ? 1 : 0;
}
