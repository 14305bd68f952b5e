/*
 * mhd-baseline: the smallest honest libmicrohttpd server for Usher's queue
 * routes. It is the ceiling for this HTTP library on this machine: whatever
 * Usher costs above it is Usher's own cost.
 *
 *   POST /v1/queues/q/visitors                 -> 201 {"id":"v<N>","status":"granted","fence":<N>}
 *   POST /v1/queues/q/visitors/v<N>/complete   -> 200 {"id":"v<N>","status":"completed"} | 404
 *   GET  /v1/queues/q                          -> 200 {"name":"q","counts":{...}}
 *   GET  /readyz                               -> 200 {"status":"ready"} (same readiness probe as Usher)
 *   anything else                              -> 404
 *
 * Daemon: internal polling thread + epoll, thread pool of 2, connection
 * limit 10000, bound to 127.0.0.1 only. Port from argv[1] (0 = any); the
 * bound port is printed on stdout as "port=N". SIGINT/SIGTERM stop it.
 *
 * Keep-alive trap (libmicrohttpd 0.9.75): a response queued on the FIRST
 * access-handler call of a request is sent with "Connection: close". Every
 * response here is queued on a later call.
 *
 * Build: cc -O2 -o mhd-baseline mhd-baseline.c $(pkg-config --cflags --libs libmicrohttpd) -lpthread
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUEUE_PATH "/v1/queues/q"
#define VISITORS_PATH "/v1/queues/q/visitors"
#define COMPLETE_SUFFIX "/complete"
#define MAX_BODY (1024 * 1024)

/* ---------- the FIFO: doubly linked list in id order + chained hash by id ---------- */

typedef struct entry {
    uint64_t id;
    struct entry *prev, *next; /* FIFO order */
    struct entry *hnext;       /* hash chain */
    size_t len;
    char body[];               /* copy of the request body */
} entry;

static struct {
    pthread_mutex_t lock;
    entry *head, *tail;
    entry **buckets;
    size_t nbuckets; /* power of two */
    uint64_t waiting;
    uint64_t next_id;
    uint64_t enqueued_total;
    uint64_t completed_total;
} q = { .lock = PTHREAD_MUTEX_INITIALIZER, .next_id = 1 };

static size_t bucket_of(uint64_t id) {
    uint64_t h = id * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (q.nbuckets - 1);
}

/* Lock held. Doubles the bucket array when the load factor passes 1. */
static int grow_buckets(void) {
    size_t n = q.nbuckets ? q.nbuckets * 2 : 1024;
    entry **nb = calloc(n, sizeof *nb);
    if (!nb) return -1;
    size_t old = q.nbuckets;
    entry **ob = q.buckets;
    q.buckets = nb;
    q.nbuckets = n;
    for (size_t i = 0; i < old; i++) {
        entry *e = ob[i];
        while (e) {
            entry *nx = e->hnext;
            size_t b = bucket_of(e->id);
            e->hnext = nb[b];
            nb[b] = e;
            e = nx;
        }
    }
    free(ob);
    return 0;
}

/* Returns the new id, or 0 on allocation failure. The body copy is made outside the lock. */
static uint64_t fifo_push(const char *body, size_t len) {
    entry *e = malloc(sizeof *e + len);
    if (!e) return 0;
    memcpy(e->body, body, len);
    e->len = len;
    e->next = NULL;
    pthread_mutex_lock(&q.lock);
    if (q.waiting + 1 > q.nbuckets && grow_buckets() != 0) {
        pthread_mutex_unlock(&q.lock);
        free(e);
        return 0;
    }
    uint64_t id = q.next_id++;
    e->id = id;
    e->prev = q.tail;
    if (q.tail) q.tail->next = e; else q.head = e;
    q.tail = e;
    size_t b = bucket_of(id);
    e->hnext = q.buckets[b];
    q.buckets[b] = e;
    q.waiting++;
    q.enqueued_total++;
    pthread_mutex_unlock(&q.lock);
    return id;
}

/* Returns 1 if the id was waiting and is now removed, 0 if unknown. */
static int fifo_remove(uint64_t id) {
    entry *found = NULL;
    pthread_mutex_lock(&q.lock);
    if (q.nbuckets) {
        entry **pp = &q.buckets[bucket_of(id)];
        while (*pp && (*pp)->id != id) pp = &(*pp)->hnext;
        if (*pp) {
            found = *pp;
            *pp = found->hnext;
            if (found->prev) found->prev->next = found->next; else q.head = found->next;
            if (found->next) found->next->prev = found->prev; else q.tail = found->prev;
            q.waiting--;
            q.completed_total++;
        }
    }
    pthread_mutex_unlock(&q.lock);
    free(found);
    return found != NULL;
}

/* ---------- HTTP ---------- */

/* Per-request state. GET requests use a static marker; POSTs get a body buffer. */
typedef struct {
    char *buf;
    size_t len, cap;
    int too_big;
} post_state;

static int get_marker;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status, const char *json, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)json, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_str(struct MHD_Connection *c, unsigned int status, const char *json) {
    return reply(c, status, json, strlen(json));
}

static const char NOT_FOUND[] = "{\"error\":{\"code\":\"not_found\",\"message\":\"not found\"}}";

/* Parses "v<digits>" into *out. Returns 1 on success. */
static int parse_vid(const char *s, size_t n, uint64_t *out) {
    if (n < 2 || n > 21 || s[0] != 'v') return 0;
    uint64_t v = 0;
    for (size_t i = 1; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return v != 0;
}

static enum MHD_Result handle_post(struct MHD_Connection *c, const char *url, post_state *ps) {
    char out[160];
    int n;
    if (strcmp(url, VISITORS_PATH) == 0) {
        if (ps->too_big) return reply_str(c, 413, "{\"error\":{\"code\":\"payload_too_large\",\"message\":\"body too large\"}}");
        /* Minimal JSON check: first non-blank byte must be '{'. */
        size_t i = 0;
        while (i < ps->len && (ps->buf[i] == ' ' || ps->buf[i] == '\t' || ps->buf[i] == '\r' || ps->buf[i] == '\n')) i++;
        if (i == ps->len || ps->buf[i] != '{')
            return reply_str(c, 400, "{\"error\":{\"code\":\"bad_request\",\"message\":\"JSON object body required\"}}");
        uint64_t id = fifo_push(ps->buf, ps->len);
        if (id == 0) return reply_str(c, 503, "{\"error\":{\"code\":\"unavailable\",\"message\":\"out of memory\"}}");
        n = snprintf(out, sizeof out, "{\"id\":\"v%llu\",\"status\":\"granted\",\"fence\":%llu}",
                     (unsigned long long)id, (unsigned long long)id);
        return reply(c, 201, out, (size_t)n);
    }
    const size_t plen = sizeof(VISITORS_PATH "/") - 1;
    const size_t slen = sizeof(COMPLETE_SUFFIX) - 1;
    size_t ulen = strlen(url);
    if (ulen > plen + slen && strncmp(url, VISITORS_PATH "/", plen) == 0 &&
        strcmp(url + ulen - slen, COMPLETE_SUFFIX) == 0) {
        const char *ids = url + plen;
        size_t idn = ulen - plen - slen;
        uint64_t id;
        if (parse_vid(ids, idn, &id) && fifo_remove(id)) {
            n = snprintf(out, sizeof out, "{\"id\":\"v%llu\",\"status\":\"completed\"}", (unsigned long long)id);
            return reply(c, 200, out, (size_t)n);
        }
    }
    return reply(c, 404, NOT_FOUND, sizeof NOT_FOUND - 1);
}

static enum MHD_Result handle_get(struct MHD_Connection *c, const char *url) {
    if (strcmp(url, QUEUE_PATH) == 0) {
        char out[200];
        pthread_mutex_lock(&q.lock);
        unsigned long long w = q.waiting, e = q.enqueued_total, d = q.completed_total;
        pthread_mutex_unlock(&q.lock);
        int n = snprintf(out, sizeof out,
                         "{\"name\":\"q\",\"counts\":{\"waiting\":%llu,\"enqueued_total\":%llu,\"completed_total\":%llu}}",
                         w, e, d);
        return reply(c, 200, out, (size_t)n);
    }
    if (strcmp(url, "/readyz") == 0) return reply_str(c, 200, "{\"status\":\"ready\"}");
    return reply(c, 404, NOT_FOUND, sizeof NOT_FOUND - 1);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **req_cls) {
    (void)cls;
    (void)version;
    int is_post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;

    if (*req_cls == NULL) {
        /* First call: headers only. Never queue a response here (keep-alive trap). */
        if (is_post) {
            post_state *ps = calloc(1, sizeof *ps);
            if (!ps) return MHD_NO;
            *req_cls = ps;
        } else {
            *req_cls = &get_marker;
        }
        return MHD_YES;
    }

    if (*req_cls == &get_marker) {
        if (*upload_data_size) { /* a body on a non-POST: discard it */
            *upload_data_size = 0;
            return MHD_YES;
        }
        if (strcmp(method, MHD_HTTP_METHOD_GET) == 0) return handle_get(c, url);
        return reply(c, 404, NOT_FOUND, sizeof NOT_FOUND - 1);
    }

    post_state *ps = *req_cls;
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (ps->too_big || ps->len + n > MAX_BODY) {
            ps->too_big = 1;
            return MHD_YES;
        }
        if (ps->len + n > ps->cap) {
            size_t cap = ps->cap ? ps->cap : 256;
            while (cap < ps->len + n) cap *= 2;
            char *nb = realloc(ps->buf, cap);
            if (!nb) return MHD_NO;
            ps->buf = nb;
            ps->cap = cap;
        }
        memcpy(ps->buf + ps->len, upload_data, n);
        ps->len += n;
        return MHD_YES;
    }
    return handle_post(c, url, ps);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    if (*req_cls && *req_cls != &get_marker) {
        post_state *ps = *req_cls;
        free(ps->buf);
        free(ps);
    }
    *req_cls = NULL;
}

int main(int argc, char **argv) {
    unsigned port = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 0;
    if (port > 65535) {
        fprintf(stderr, "usage: %s [port]\n", argv[0]);
        return 2;
    }

    /* Block the stop signals in every thread (the MHD threads inherit the mask). */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, (uint16_t)port, NULL, NULL, on_request, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)2,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)10000,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
        MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "mhd-baseline: MHD_start_daemon failed (port %u)\n", port);
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("port=%u\n", info ? (unsigned)info->port : port);
    fflush(stdout);

    int sig = 0;
    sigwait(&stop, &sig);
    MHD_stop_daemon(d);
    return 0;
}
