/* pytest_llmperf.client._reader: the streaming client's socket reads, in C.
 *
 * Why C: at tens of thousands of streamed chunks per second, the Python that ran once per socket
 * read (the event loop's callback, recvmsg's wrapper, the stamp, the HTTP parser's callbacks) cost
 * more CPU than the kernel's own work for the read, and a client out of CPU reports the engine
 * slower than it is. Here one wake of the event loop reads every ready socket without running
 * any Python: one recvmsg per socket, the kernel's receive time (SO_TIMESTAMPNS) moved onto the
 * client's clock, and the HTTP/1.1 response framing (status line, headers, chunked encoding or
 * Content-Length) undone into one body buffer per connection, with each read's end offset and
 * time beside it. Python is called once per response (headers, end), on a close, and every
 * `flush_reads` reads or `flush_s` seconds of a stream, to decode the body gathered so far
 * (sse.py decodes it in bulk).
 *
 * readers.py holds the same contract in Python (httptools' parser, one loop callback per read)
 * for platforms without epoll or without a compiler, and for TLS; the tests run both.
 *
 * Reader(flush_reads, flush_s)
 *   fileno()            the epoll fd: the event loop watches it and calls drain(now) when ready
 *   add(fd, conn)       watch a connected socket; conn gets the callbacks below
 *   expect(fd, now)     a request went out on fd: parse a new response from here
 *   take(fd)            -> (body bytes, [end offset of each read], [time of each read]), emptied
 *   discard(fd)         stop watching fd (the caller closes the socket)
 *   drain(now)          read every ready socket once, -> how many were; `now` is the client's
 *                       clock, read just before
 * Callbacks on conn: _on_headers(status, keep_alive), _on_body_pending(), _on_complete(),
 * _on_closed(errno or 0), _on_malformed(reason). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READ_BYTES (64 * 1024)
#define MAX_EVENTS 512
#define MAX_HEAD (64 * 1024)

enum phase {
    IDLE,         /* no request outstanding: any byte is an error */
    HEAD,         /* status line and headers, until the empty line */
    CHUNK_SIZE,   /* a chunk's hex size line (extensions skipped) */
    CHUNK_DATA,   /* `remaining` bytes of chunk data */
    CHUNK_END,    /* the CRLF after a chunk's data */
    TRAILERS,     /* trailer lines after the last chunk, until an empty line */
    LENGTH,       /* `remaining` bytes of a Content-Length body */
    UNTIL_CLOSE,  /* a body without length or chunks: it ends when the server closes */
};

typedef struct {
    PyObject *conn;
    int fd;
    int dead; /* discarded during a drain; freed when the drain ends */
    enum phase phase;
    long long remaining;
    int size_digits, in_extension, saw_cr, line_len;
    char *head;
    Py_ssize_t head_len, head_cap;
    char *body;
    Py_ssize_t body_len, body_cap;
    Py_ssize_t *ends;
    double *stamps;
    Py_ssize_t reads, ends_cap, stamps_cap;
    double flushed_at;
} Stream;

typedef struct {
    PyObject_HEAD
    int epfd;
    Stream **streams; /* by fd */
    int streams_len;
    Stream **graveyard; /* discarded during a drain */
    Py_ssize_t graveyard_len, graveyard_cap;
    int draining;
    Py_ssize_t flush_reads;
    double flush_s;
    char *buffer;
} Reader;

static PyObject *s_on_headers, *s_on_body_pending, *s_on_complete, *s_on_closed,
    *s_on_malformed;

/* ------------------------------------------------------------------ buffers */

static int grow(void **data, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap) return 0;
    Py_ssize_t cap2 = *cap ? *cap : 16;
    while (cap2 < need) cap2 *= 2;
    void *p = PyMem_Realloc(*data, (size_t)cap2 * item);
    if (!p) { PyErr_NoMemory(); return -1; }
    *data = p;
    *cap = cap2;
    return 0;
}

static int body_append(Stream *s, const char *data, Py_ssize_t n) {
    if (grow((void **)&s->body, &s->body_cap, s->body_len + n, 1) < 0) return -1;
    memcpy(s->body + s->body_len, data, (size_t)n);
    s->body_len += n;
    return 0;
}

/* Up to `remaining` body bytes of a chunk or a Content-Length body: -> how many it took. */
static Py_ssize_t body_counted(Stream *s, const char *data, Py_ssize_t n) {
    Py_ssize_t take = n < s->remaining ? n : (Py_ssize_t)s->remaining;
    if (body_append(s, data, take) < 0) return -1;
    s->remaining -= take;
    return take;
}

static void stream_reset(Stream *s) {
    s->phase = IDLE;
    s->remaining = 0;
    s->size_digits = s->in_extension = s->saw_cr = s->line_len = 0;
    s->head_len = s->body_len = s->reads = 0;
}

static void stream_free(Stream *s) {
    Py_XDECREF(s->conn);
    PyMem_Free(s->head);
    PyMem_Free(s->body);
    PyMem_Free(s->ends);
    PyMem_Free(s->stamps);
    PyMem_Free(s);
}

static Stream *stream_of(Reader *r, int fd) {
    if (fd < 0 || fd >= r->streams_len) return NULL;
    return r->streams[fd];
}

/* ------------------------------------------------------------------ callbacks */

/* Each returns -1 with a Python error set when the callback raised. After any callback the
 * stream may have been discarded (s->dead) or handed a new request: the caller re-checks. */
static int call0(Stream *s, PyObject *name) {
    PyObject *res = PyObject_CallMethodNoArgs(s->conn, name);
    if (!res) return -1;
    Py_DECREF(res);
    return 0;
}

static int call_obj(Stream *s, PyObject *name, PyObject *arg) {
    if (!arg) return -1;
    PyObject *res = PyObject_CallMethodOneArg(s->conn, name, arg);
    Py_DECREF(arg);
    if (!res) return -1;
    Py_DECREF(res);
    return 0;
}

static int malformed(Stream *s, const char *reason) {
    s->phase = IDLE;
    return call_obj(s, s_on_malformed, PyUnicode_FromString(reason));
}

/* ------------------------------------------------------------------ HTTP/1.1 response head */

static int starts_ci(const char *p, const char *end, const char *word) {
    size_t n = strlen(word);
    return (size_t)(end - p) >= n && strncasecmp(p, word, n) == 0;
}

static int contains_ci(const char *p, const char *end, const char *word) {
    size_t n = strlen(word);
    for (; (size_t)(end - p) >= n; p++)
        if (strncasecmp(p, word, n) == 0) return 1;
    return 0;
}

/* The head is complete in s->head[0:len]. Returns 0 and sets the body's phase, or -1 with an
 * error reason in *why. `informational` is set for a 1xx response (its head is skipped). */
static int parse_head(Stream *s, Py_ssize_t len, int *status, int *keep_alive,
                      int *informational, int *empty, const char **why) {
    const char *p = s->head, *end = s->head + len;
    if (len < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') || p[8] != ' '
        || p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9') {
        *why = "not an HTTP/1.x status line";
        return -1;
    }
    int http10 = p[7] == '0';
    *status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    *informational = *status < 200;
    int chunked = 0, close = 0, keep = 0;
    long long length = -1;
    const char *line = memchr(p, '\n', (size_t)(end - p));
    while (line && ++line < end) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol) eol = end;
        const char *stop = eol > line && eol[-1] == '\r' ? eol - 1 : eol;
        const char *colon = memchr(line, ':', (size_t)(stop - line));
        if (colon) {
            const char *value = colon + 1;
            while (value < stop && (*value == ' ' || *value == '\t')) value++;
            Py_ssize_t name_len = colon - line;
            if (name_len == 17 && starts_ci(line, colon, "transfer-encoding")) {
                if (contains_ci(value, stop, "chunked")) chunked = 1;
            } else if (name_len == 14 && starts_ci(line, colon, "content-length")) {
                const char *v = value;
                long long n = 0;
                if (v == stop) { *why = "an empty Content-Length"; return -1; }
                for (; v < stop && *v != ' ' && *v != '\t'; v++) {
                    if (*v < '0' || *v > '9' || n > (LLONG_MAX - 9) / 10) {
                        *why = "a Content-Length that is not a number";
                        return -1;
                    }
                    n = n * 10 + (*v - '0');
                }
                length = n;
            } else if (name_len == 10 && starts_ci(line, colon, "connection")) {
                if (contains_ci(value, stop, "close")) close = 1;
                if (contains_ci(value, stop, "keep-alive")) keep = 1;
            }
        }
        line = eol < end ? eol : NULL;
    }
    *keep_alive = http10 ? (keep && !close) : !close;
    if (*informational) return 0;
    *empty = 0;
    if (*status == 204 || *status == 304) {
        *empty = 1; /* no body: complete once the head is */
    } else if (chunked) {
        s->phase = CHUNK_SIZE;
        s->remaining = 0;
        s->size_digits = s->in_extension = s->saw_cr = 0;
    } else if (length >= 0) {
        s->phase = LENGTH;
        s->remaining = length;
        *empty = length == 0;
    } else {
        s->phase = UNTIL_CLOSE;
        *keep_alive = 0;
    }
    return 0;
}

/* Bytes of the head: gathered until the empty line. Returns the bytes of `data` it used, or -1
 * with a Python error set. Sets *stop when it reported the response malformed, and *complete
 * when the head ended a response without a body. */
static Py_ssize_t feed_head(Stream *s, const char *data, Py_ssize_t n, int *stop,
                            int *complete) {
    Py_ssize_t before = s->head_len;
    if (grow((void **)&s->head, &s->head_cap, before + n, 1) < 0) return -1;
    memcpy(s->head + before, data, (size_t)n);
    s->head_len += n;
    Py_ssize_t known = s->head_len < 7 ? s->head_len : 7;
    if (memcmp(s->head, "HTTP/1.", (size_t)known) != 0) { /* say so now, not at the close */
        *stop = 1;
        if (malformed(s, "not an HTTP/1.x status line") < 0) return -1;
        return n;
    }
    /* The empty line may straddle the previous read: look from 3 bytes back. */
    Py_ssize_t from = before > 3 ? before - 3 : 0, end = -1;
    for (Py_ssize_t i = from; i < s->head_len; i++) {
        if (s->head[i] != '\n') continue;
        if (i >= 1 && s->head[i - 1] == '\n') { end = i + 1; break; }
        if (i >= 2 && s->head[i - 1] == '\r' && s->head[i - 2] == '\n') { end = i + 1; break; }
    }
    if (end < 0) {
        if (s->head_len > MAX_HEAD) {
            *stop = 1;
            if (malformed(s, "response headers over 64 KiB") < 0) return -1;
        }
        return n;
    }
    int status = 0, keep_alive = 0, informational = 0, empty = 0;
    const char *why = NULL;
    if (parse_head(s, end, &status, &keep_alive, &informational, &empty, &why) < 0) {
        *stop = 1;
        if (malformed(s, why) < 0) return -1;
        return n;
    }
    Py_ssize_t used = end - before;
    s->head_len = 0;
    if (informational) return used; /* 100 Continue, 103 Early Hints: the real head follows */
    PyObject *code = PyLong_FromLong(status);
    if (!code) return -1;
    PyObject *res = PyObject_CallMethodObjArgs(s->conn, s_on_headers, code,
                                               keep_alive ? Py_True : Py_False, NULL);
    Py_DECREF(code);
    if (!res) return -1;
    Py_DECREF(res);
    *complete = empty;
    return used;
}

/* ------------------------------------------------------------------ one read */

/* Runs `data` through the response's framing. Returns 0, or -1 with a Python error set. The
 * stream may be dead or reset when this returns. */
static int feed(Reader *r, Stream *s, const char *data, Py_ssize_t n, double stamp) {
    Py_ssize_t body_before = s->body_len;
    Py_ssize_t i = 0;
    int completed = 0;
    while (i < n && !s->dead) {
        switch (s->phase) {
        case IDLE:
            return malformed(s, "bytes from the server with no request outstanding");
        case HEAD: {
            int stop = 0;
            Py_ssize_t used = feed_head(s, data + i, n - i, &stop, &completed);
            if (used < 0) return -1;
            if (stop) return 0;
            i += used;
            break;
        }
        case CHUNK_SIZE: {
            char c = data[i++];
            if (c == '\n') {
                if (!s->size_digits) return malformed(s, "a chunk size line without a size");
                s->size_digits = s->in_extension = s->saw_cr = 0;
                if (s->remaining == 0) { s->phase = TRAILERS; s->line_len = 0; }
                else s->phase = CHUNK_DATA;
            } else if (s->in_extension || c == '\r') {
                /* chunk extensions are skipped, CR waits for its LF */
            } else if (c == ';' || c == ' ' || c == '\t') {
                s->in_extension = 1;
            } else {
                int v = (c >= '0' && c <= '9') ? c - '0'
                      : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                      : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
                if (v < 0 || s->remaining > (LLONG_MAX >> 4))
                    return malformed(s, "a chunk size that is not hexadecimal");
                s->remaining = s->remaining * 16 + v;
                s->size_digits++;
            }
            break;
        }
        case CHUNK_DATA: {
            Py_ssize_t used = body_counted(s, data + i, n - i);
            if (used < 0) return -1;
            i += used;
            if (s->remaining == 0) { s->phase = CHUNK_END; s->saw_cr = 0; }
            break;
        }
        case CHUNK_END: {
            char c = data[i++];
            if (c == '\r' && !s->saw_cr) s->saw_cr = 1;
            else if (c == '\n') { s->phase = CHUNK_SIZE; s->remaining = 0; s->saw_cr = 0; }
            else return malformed(s, "chunk data longer than its size");
            break;
        }
        case TRAILERS: {
            char c = data[i++];
            if (c == '\n') {
                if (s->line_len == 0) { completed = 1; s->phase = IDLE; }
                s->line_len = 0;
            } else if (c != '\r') {
                s->line_len++;
            }
            break;
        }
        case LENGTH: {
            Py_ssize_t used = body_counted(s, data + i, n - i);
            if (used < 0) return -1;
            i += used;
            if (s->remaining == 0) completed = 1;
            break;
        }
        case UNTIL_CLOSE:
            if (body_append(s, data + i, n - i) < 0) return -1;
            i = n;
            break;
        }
        if (completed) break;
    }
    if (s->dead) return 0;
    if (s->body_len > body_before) {
        if (grow((void **)&s->ends, &s->ends_cap, s->reads + 1, sizeof(Py_ssize_t)) < 0
            || grow((void **)&s->stamps, &s->stamps_cap, s->reads + 1, sizeof(double)) < 0)
            return -1;
        s->ends[s->reads] = s->body_len;
        s->stamps[s->reads] = stamp;
        s->reads++;
    }
    if (completed) {
        s->phase = IDLE;
        if (call0(s, s_on_complete) < 0) return -1;
        if (!s->dead && i < n && s->phase == IDLE)
            return malformed(s, "bytes after the end of the response");
        return 0;
    }
    if (s->reads && (s->reads >= r->flush_reads || stamp - s->flushed_at >= r->flush_s)) {
        s->flushed_at = stamp;
        return call0(s, s_on_body_pending);
    }
    return 0;
}

static int closed(Stream *s, int err) {
    if (!err && s->phase == UNTIL_CLOSE) {
        s->phase = IDLE;
        if (call0(s, s_on_complete) < 0) return -1;
        if (s->dead) return 0;
    }
    s->phase = IDLE;
    return call_obj(s, s_on_closed, PyLong_FromLong(err));
}

/* ------------------------------------------------------------------ the type */

static int Reader_init(Reader *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"flush_reads", "flush_s", NULL};
    Py_ssize_t flush_reads = 32;
    double flush_s = 0.25;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|nd", kwlist, &flush_reads, &flush_s))
        return -1;
    if (flush_reads < 1) {
        PyErr_SetString(PyExc_ValueError, "flush_reads must be at least 1");
        return -1;
    }
    self->flush_reads = flush_reads;
    self->flush_s = flush_s;
    if (self->epfd < 0) {
        self->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (self->epfd < 0) { PyErr_SetFromErrno(PyExc_OSError); return -1; }
    }
    if (!self->buffer) {
        self->buffer = PyMem_Malloc(READ_BYTES);
        if (!self->buffer) { PyErr_NoMemory(); return -1; }
    }
    return 0;
}

static PyObject *Reader_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Reader *self = (Reader *)type->tp_alloc(type, 0);
    if (self) self->epfd = -1;
    return (PyObject *)self;
}

static void bury(Reader *r) {
    for (Py_ssize_t i = 0; i < r->graveyard_len; i++) stream_free(r->graveyard[i]);
    r->graveyard_len = 0;
}

static void Reader_dealloc(Reader *self) {
    for (int fd = 0; fd < self->streams_len; fd++)
        if (self->streams[fd]) stream_free(self->streams[fd]);
    bury(self);
    PyMem_Free(self->streams);
    PyMem_Free(self->graveyard);
    PyMem_Free(self->buffer);
    if (self->epfd >= 0) close(self->epfd);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Reader_fileno(Reader *self, PyObject *unused) {
    return PyLong_FromLong(self->epfd);
}

static PyObject *Reader_add(Reader *self, PyObject *args) {
    int fd;
    PyObject *conn;
    if (!PyArg_ParseTuple(args, "iO", &fd, &conn)) return NULL;
    if (fd < 0) { PyErr_SetString(PyExc_ValueError, "fd must be >= 0"); return NULL; }
    if (stream_of(self, fd)) {
        PyErr_Format(PyExc_ValueError, "fd %d is already watched", fd);
        return NULL;
    }
    if (fd >= self->streams_len) {
        int len = self->streams_len ? self->streams_len : 64;
        while (len <= fd) len *= 2;
        Stream **p = PyMem_Realloc(self->streams, (size_t)len * sizeof(Stream *));
        if (!p) return PyErr_NoMemory();
        memset(p + self->streams_len, 0, (size_t)(len - self->streams_len) * sizeof(Stream *));
        self->streams = p;
        self->streams_len = len;
    }
    Stream *s = PyMem_Calloc(1, sizeof(Stream));
    if (!s) return PyErr_NoMemory();
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(self->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        PyMem_Free(s);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_INCREF(conn);
    s->conn = conn;
    s->fd = fd;
    stream_reset(s);
    self->streams[fd] = s;
    Py_RETURN_NONE;
}

static Stream *watched(Reader *self, PyObject *args, double *now) {
    int fd;
    if (now ? !PyArg_ParseTuple(args, "id", &fd, now) : !PyArg_ParseTuple(args, "i", &fd))
        return NULL;
    Stream *s = stream_of(self, fd);
    if (!s) PyErr_Format(PyExc_KeyError, "fd %d is not watched", fd);
    return s;
}

static PyObject *Reader_expect(Reader *self, PyObject *args) {
    double now;
    Stream *s = watched(self, args, &now);
    if (!s) return NULL;
    stream_reset(s);
    s->phase = HEAD;
    s->flushed_at = now;
    Py_RETURN_NONE;
}

static PyObject *Reader_take(Reader *self, PyObject *args) {
    Stream *s = watched(self, args, NULL);
    if (!s) return NULL;
    PyObject *body = PyBytes_FromStringAndSize(s->body, s->body_len);
    PyObject *ends = PyList_New(s->reads), *stamps = PyList_New(s->reads);
    if (!body || !ends || !stamps) goto fail;
    for (Py_ssize_t i = 0; i < s->reads; i++) {
        PyObject *end = PyLong_FromSsize_t(s->ends[i]), *stamp = PyFloat_FromDouble(s->stamps[i]);
        if (!end || !stamp) { Py_XDECREF(end); Py_XDECREF(stamp); goto fail; }
        PyList_SET_ITEM(ends, i, end);
        PyList_SET_ITEM(stamps, i, stamp);
    }
    s->body_len = s->reads = 0;
    return Py_BuildValue("(NNN)", body, ends, stamps);
fail:
    Py_XDECREF(body);
    Py_XDECREF(ends);
    Py_XDECREF(stamps);
    return NULL;
}

static PyObject *Reader_discard(Reader *self, PyObject *args) {
    int fd;
    if (!PyArg_ParseTuple(args, "i", &fd)) return NULL;
    Stream *s = stream_of(self, fd);
    if (!s) Py_RETURN_NONE;
    epoll_ctl(self->epfd, EPOLL_CTL_DEL, fd, NULL); /* fails only if already closed: fine */
    self->streams[fd] = NULL;
    if (self->draining) {
        /* The drain may still hold a pointer to it: free it when the drain ends. */
        s->dead = 1;
        if (grow((void **)&self->graveyard, &self->graveyard_cap, self->graveyard_len + 1,
                 sizeof(Stream *)) < 0) {
            stream_free(s);
            return NULL;
        }
        self->graveyard[self->graveyard_len++] = s;
    } else {
        stream_free(s);
    }
    Py_RETURN_NONE;
}

/* The kernel's receive time (CLOCK_REALTIME) of the bytes a recvmsg returned, on the client's
 * clock: the client's clock now (`now` at the drain's start, moved on by the monotonic time since,
 * `mono0`), minus the bytes' age on the wall clock read now. The age, not the kernel's time
 * itself, crosses clocks, so a step of the wall clock shifts a stamp by at most that read's age.
 * Without a kernel time, the read is stamped now. */
static double stamp_of(struct msghdr *msg, double now, const struct timespec *mono0) {
    struct timespec mono, real;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    double here = now + (double)(mono.tv_sec - mono0->tv_sec)
                  + (mono.tv_nsec - mono0->tv_nsec) * 1e-9;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS) continue;
        struct timespec ts;
        memcpy(&ts, CMSG_DATA(c), sizeof ts);
        clock_gettime(CLOCK_REALTIME, &real);
        double age = (double)(real.tv_sec - ts.tv_sec) + (real.tv_nsec - ts.tv_nsec) * 1e-9;
        return age > 0 ? here - age : here;
    }
    return here;
}

static PyObject *Reader_drain(Reader *self, PyObject *arg) {
    double now = PyFloat_AsDouble(arg);
    if (now == -1.0 && PyErr_Occurred()) return NULL;
    if (self->draining) return PyLong_FromLong(0); /* called from one of its own callbacks */
    struct epoll_event events[MAX_EVENTS];
    int n = epoll_wait(self->epfd, events, MAX_EVENTS, 0);
    if (n < 0) {
        if (errno == EINTR) return PyLong_FromLong(0);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    struct timespec mono0;
    clock_gettime(CLOCK_MONOTONIC, &mono0);
    char control[CMSG_SPACE(sizeof(struct timespec))];
    int failed = 0;
    self->draining = 1;
    for (int k = 0; k < n && !failed; k++) {
        int fd = events[k].data.fd;
        Stream *s = stream_of(self, fd);
        if (!s) continue;
        struct iovec iov = {self->buffer, READ_BYTES};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = sizeof control};
        ssize_t got = recvmsg(fd, &msg, MSG_DONTWAIT);
        if (got < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
            failed = closed(s, errno) < 0;
        } else if (got == 0) {
            failed = closed(s, 0) < 0;
        } else {
            failed = feed(self, s, self->buffer, got, stamp_of(&msg, now, &mono0)) < 0;
        }
    }
    self->draining = 0;
    bury(self);
    if (failed) return NULL;
    return PyLong_FromLong(n);
}

static PyMethodDef Reader_methods[] = {
    {"fileno", (PyCFunction)Reader_fileno, METH_NOARGS, "The epoll fd to watch."},
    {"add", (PyCFunction)Reader_add, METH_VARARGS, "add(fd, conn): watch a connected socket."},
    {"expect", (PyCFunction)Reader_expect, METH_VARARGS,
     "expect(fd, now): a request went out; parse a new response."},
    {"take", (PyCFunction)Reader_take, METH_VARARGS,
     "take(fd) -> (body, ends, stamps): the body gathered so far, emptied."},
    {"discard", (PyCFunction)Reader_discard, METH_VARARGS, "discard(fd): stop watching."},
    {"drain", (PyCFunction)Reader_drain, METH_O,
     "drain(now) -> the number of sockets that were ready: read each of them once."},
    {NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pytest_llmperf.client._reader.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Reads streamed HTTP/1.1 responses off many sockets per event-loop wake.",
    .tp_new = Reader_new,
    .tp_init = (initproc)Reader_init,
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_methods = Reader_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pytest_llmperf.client._reader",
    "The streaming client's socket reads, in C (see readers.py).", -1, NULL,
};

PyMODINIT_FUNC PyInit__reader(void) {
    if (PyType_Ready(&ReaderType) < 0) return NULL;
    s_on_headers = PyUnicode_InternFromString("_on_headers");
    s_on_body_pending = PyUnicode_InternFromString("_on_body_pending");
    s_on_complete = PyUnicode_InternFromString("_on_complete");
    s_on_closed = PyUnicode_InternFromString("_on_closed");
    s_on_malformed = PyUnicode_InternFromString("_on_malformed");
    if (!s_on_headers || !s_on_body_pending || !s_on_complete || !s_on_closed || !s_on_malformed)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&ReaderType);
    if (PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(&ReaderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
