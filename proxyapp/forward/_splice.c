/* The C relay of forwarded connections: pairs of sockets spliced by one thread of its own, without the GIL.
 *
 * Python hands over a client's socket and its server's once the server is connected (``add``); from then on a
 * background thread runs an epoll loop over every pair and copies bytes both ways, never touching a Python object.
 * The thread starts with the first pair, so a process that forks its workers before serving forks no thread; a fork
 * after it started gives the child an empty relay (the child closes its copies of the pairs' sockets, which stay the
 * parent's).
 *
 * Each direction reads into the thread's scratch buffer and writes at once to the other socket. What the target does
 * not take is kept in the direction's own buffer (at most one read, 64 KiB) and the source is not read until the
 * target has taken it all (EPOLLOUT): a slow reader holds its sender back and memory stays bounded. Triggering is by
 * level, each socket's mask saying what the pair waits for. An end is seen by the read that returns 0 or fails, and by
 * EPOLLHUP/EPOLLERR (which epoll always reports); EPOLLRDHUP is not asked for, as a level-triggered one would keep
 * waking the loop while a side is not read for backpressure.
 *
 * When either side ends (EOF, an error, a hang-up) the pair closes: nothing more is read, what is buffered is written
 * to whichever side still takes it, then both sockets are closed and the pair's end is queued with its counts (the
 * bytes read from each side) for ``ended``; an eventfd (``notify_fd``) is readable while the queue is not empty.
 * ``close`` from Python shuts both sockets down: the thread sees the hang-up and ends the pair. Only the thread
 * closes sockets and frees pairs, under the mutex that guards the list of live pairs, so ``close`` and ``snapshot``
 * never touch a freed pair or a reused file descriptor.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHUNK (64 * 1024)
#define MAX_EVENTS 128

struct pair;

/* One socket of a pair: what epoll's events point at. */
struct side {
    struct pair *pair;
    int index; /* 0: the client, 1: the server */
    int fd;
    uint32_t mask;   /* the events epoll waits for on it now */
    int registered;  /* whether it is in the epoll set */
};

/* The bytes read from one side and not yet written to the other. */
struct flow {
    char *buf;
    size_t off, len;
    uint64_t count; /* bytes read from the source since the pair began */
};

struct pair {
    uint64_t id;
    struct side side[2];
    struct flow flow[2]; /* flow[i]: read from side i, written to side 1 - i */
    int closing;         /* reading stopped: the buffers are being flushed before both sockets close */
    int hung[2];         /* side i hung up while it was not read: what it sent before is read, then the pair ends */
    int dead;            /* closed: freed at the end of the batch of events */
    struct pair *prev, *next;
    struct pair *next_new; /* in the queue of pairs the thread has not registered yet */
};

struct ended_pair {
    uint64_t id, c2s, s2c;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the list of pairs, the ended queue, the start */
static struct pair *pairs;                                /* the live pairs */
static struct pair *incoming;                             /* added, not yet registered by the thread */
static struct pair *graveyard;                            /* the thread's pairs closed in this batch */
static struct ended_pair *ended_queue;
static size_t ended_len, ended_cap;
static uint64_t next_id = 1;
static int epoll_fd = -1, event_fd = -1, wake_fd = -1; /* wake_fd: new pairs for the thread */
static int started;
static char scratch[CHUNK]; /* only the thread reads into it */

/* ------------------------------------------------------------------------------------------- the thread's work */

static int set_mask(struct side *s, uint32_t mask) {
    struct epoll_event ev;
    if (s->registered && s->mask == mask)
        return 0;
    memset(&ev, 0, sizeof ev);
    ev.events = mask;
    ev.data.ptr = s;
    if (epoll_ctl(epoll_fd, s->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s->fd, &ev) < 0)
        return -1;
    s->registered = 1;
    s->mask = mask;
    return 0;
}

static void unregister(struct side *s) {
    if (s->registered) {
        epoll_ctl(epoll_fd, EPOLL_CTL_DEL, s->fd, NULL);
        s->registered = 0;
    }
}

/* Forget what flow ``f`` holds (written, or its target is gone). */
static void drop(struct flow *f) {
    free(f->buf);
    f->buf = NULL;
    f->off = f->len = 0;
}

/* Write what flow ``f`` holds to ``fd``: 0 when it is all written or some waits for room, -1 when the socket failed. */
static int flush(struct flow *f, int fd) {
    while (f->len > 0) {
        ssize_t n = send(fd, f->buf + f->off, f->len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -1;
        }
        f->off += (size_t)n;
        f->len -= (size_t)n;
    }
    drop(f);
    return 0;
}

/* Keep ``len`` bytes of ``data`` as what flow ``f`` still has to write; -1 when memory ran out. */
static int keep(struct flow *f, const char *data, size_t len) {
    f->buf = malloc(len);
    if (f->buf == NULL)
        return -1;
    memcpy(f->buf, data, len);
    f->off = 0;
    f->len = len;
    return 0;
}

static void finish(struct pair *p);

/* Give a pair's sockets the masks it needs now; a socket that cannot be polled ends the pair. */
static void update_masks(struct pair *p) {
    for (int i = 0; i < 2; i++) {
        struct side *s = &p->side[i];
        uint32_t mask = 0;
        if (!p->closing && p->flow[i].len == 0)
            mask |= EPOLLIN;
        if (p->flow[1 - i].len > 0)
            mask |= EPOLLOUT;
        if (mask == 0 && (p->closing || p->hung[i]))
            unregister(s); /* nothing to do with it now: its hang-up must not keep waking the loop */
        else if (set_mask(s, mask) < 0) {
            finish(p);
            return;
        }
    }
}

/* Make an eventfd readable (its counter cannot overflow in practice: a write fails only with EINTR). */
static void wake(int fd) {
    uint64_t one = 1;
    while (write(fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

/* Empty an eventfd. */
static void drain(int fd) {
    uint64_t value;
    while (read(fd, &value, sizeof value) < 0 && errno == EINTR) {
    }
}

/* Close both sockets, queue the pair's end and move it to the graveyard. */
static void finish(struct pair *p) {
    struct ended_pair e = {p->id, p->flow[0].count, p->flow[1].count};
    pthread_mutex_lock(&lock);
    for (int i = 0; i < 2; i++) {
        unregister(&p->side[i]);
        close(p->side[i].fd); /* Linux releases the descriptor even when close reports an error */
        p->side[i].fd = -1;
        drop(&p->flow[i]);
    }
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        pairs = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    if (ended_len == ended_cap) {
        size_t cap = ended_cap ? ended_cap * 2 : 64;
        struct ended_pair *grown = realloc(ended_queue, cap * sizeof *grown);
        if (grown != NULL) {
            ended_queue = grown;
            ended_cap = cap;
        }
    }
    if (ended_len < ended_cap) /* out of memory: the end is lost, the pair is still freed */
        ended_queue[ended_len++] = e;
    pthread_mutex_unlock(&lock);
    p->dead = 1;
    p->next = graveyard;
    graveyard = p;
    wake(event_fd);
}

/* Stop reading: the pair ends once its buffers are flushed (or cannot be). */
static void begin_closing(struct pair *p) {
    p->closing = 1;
    if (p->flow[0].len == 0 && p->flow[1].len == 0)
        finish(p);
    else
        update_masks(p);
}

/* Read once from side ``i`` and write it to the other side; what it does not take waits in the flow. */
static void relay(struct pair *p, int i) {
    struct flow *f = &p->flow[i];
    int to = p->side[1 - i].fd;
    ssize_t n;
    do
        n = recv(p->side[i].fd, scratch, CHUNK, 0);
    while (n < 0 && errno == EINTR);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        begin_closing(p);
        return;
    }
    if (n < 0)
        return;
    __atomic_store_n(&f->count, f->count + (uint64_t)n, __ATOMIC_RELAXED);
    size_t done = 0;
    while (done < (size_t)n) {
        ssize_t w = send(to, scratch + done, (size_t)n - done, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            begin_closing(p); /* the target is gone: nothing of this can reach it */
            return;
        }
        done += (size_t)w;
    }
    if (done < (size_t)n) {
        if (keep(f, scratch + done, (size_t)n - done) < 0) {
            begin_closing(p);
            return;
        }
        update_masks(p);
    }
}

static void handle(struct side *s, uint32_t events) {
    struct pair *p = s->pair;
    int i = s->index;
    if (p->dead)
        return;
    if (events & EPOLLOUT) {
        if (flush(&p->flow[1 - i], s->fd) < 0) {
            drop(&p->flow[1 - i]); /* it cannot be written any more */
            begin_closing(p);
            return;
        }
        if (p->closing && p->flow[0].len == 0 && p->flow[1].len == 0) {
            finish(p);
            return;
        }
        update_masks(p);
    }
    if (p->dead)
        return;
    /* A hang-up is read as well: the events may predate this batch's flush that made side i readable again (the
     * mask had no EPOLLIN then), and what side i sent before hanging up is still to be read; the read says EOF. */
    if ((events & (EPOLLIN | EPOLLHUP)) && !p->closing && p->flow[i].len == 0) {
        relay(p, i);
        return;
    }
    if (events & (EPOLLERR | EPOLLHUP)) {
        /* Nothing can be written to side i any more, but what it sent before hanging up may still wait to be read
         * (a server's last message while the client was slow): it is, once the other side has taken the rest. */
        drop(&p->flow[1 - i]);
        if ((events & EPOLLERR) || p->flow[i].len == 0) {
            if (p->closing && p->flow[i].len > 0)
                update_masks(p);
            else if (p->closing)
                finish(p);
            else
                begin_closing(p);
            return;
        }
        p->hung[i] = 1;
        update_masks(p);
    }
}

/* Register the pairs added since the last wake-up. */
static void take_incoming(void) {
    drain(wake_fd);
    pthread_mutex_lock(&lock);
    struct pair *p = incoming;
    incoming = NULL;
    pthread_mutex_unlock(&lock);
    while (p != NULL) {
        struct pair *next = p->next_new;
        if (p->closing)
            begin_closing(p);
        else
            update_masks(p);
        p = next;
    }
}

static void *run(void *unused) {
    (void)unused;
    struct epoll_event events[MAX_EVENTS];
    for (;;) {
        int n = epoll_wait(epoll_fd, events, MAX_EVENTS, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return NULL; /* the epoll fd is gone: nothing more can be relayed */
        }
        for (int k = 0; k < n; k++) {
            if (events[k].data.ptr == NULL)
                take_incoming();
            else
                handle(events[k].data.ptr, events[k].events);
        }
        while (graveyard != NULL) {
            struct pair *p = graveyard;
            graveyard = p->next;
            free(p);
        }
    }
}

/* ------------------------------------------------------------------------------------------- start and fork */

static void before_fork(void) { pthread_mutex_lock(&lock); }

static void after_fork_parent(void) { pthread_mutex_unlock(&lock); }

/* The child has no relay thread: it drops the parent's pairs (closing only its own copies of their sockets). */
static void after_fork_child(void) {
    struct pair *p = pairs;
    while (p != NULL) {
        struct pair *next = p->next;
        for (int i = 0; i < 2; i++) {
            if (p->side[i].fd >= 0)
                close(p->side[i].fd);
            free(p->flow[i].buf);
        }
        free(p);
        p = next;
    }
    pairs = incoming = NULL;
    graveyard = NULL; /* the parent's thread frees those */
    free(ended_queue);
    ended_queue = NULL;
    ended_len = ended_cap = 0;
    if (epoll_fd >= 0)
        close(epoll_fd);
    if (event_fd >= 0)
        close(event_fd);
    if (wake_fd >= 0)
        close(wake_fd);
    epoll_fd = event_fd = wake_fd = -1;
    started = 0;
    pthread_mutex_unlock(&lock);
}

/* Start the thread if it is not running; with the lock held. Sets a Python error and returns -1 on failure. */
static int ensure_started(void) {
    if (started)
        return 0;
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.ptr = NULL;
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int err = 0;
    if (epoll_fd < 0 || event_fd < 0 || wake_fd < 0 || epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) < 0)
        err = errno;
    pthread_t thread;
    if (err == 0) { /* the thread starts with every signal blocked: they are the main thread's, which Python handles */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        err = pthread_create(&thread, NULL, run, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    if (err != 0) {
        int fds[3] = {epoll_fd, event_fd, wake_fd};
        for (int k = 0; k < 3; k++)
            if (fds[k] >= 0)
                close(fds[k]);
        epoll_fd = event_fd = wake_fd = -1;
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    pthread_detach(thread);
    started = 1;
    return 0;
}

/* ------------------------------------------------------------------------------------------- Python's functions */

/* add(client_fd, server_fd, pending): the descriptors are the relay's from the call on, closed by it on failure too. */
static PyObject *splice_add(PyObject *module, PyObject *args) {
    int fds[2];
    Py_buffer pending;
    struct pair *p = NULL;
    (void)module;
    if (!PyArg_ParseTuple(args, "iiy*:add", &fds[0], &fds[1], &pending))
        return NULL;
    for (int i = 0; i < 2; i++) {
        int flags = fcntl(fds[i], F_GETFL);
        if (flags < 0 || fcntl(fds[i], F_SETFL, flags | O_NONBLOCK) < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            goto fail;
        }
    }
    p = calloc(1, sizeof *p);
    if (p == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int i = 0; i < 2; i++) {
        p->side[i].pair = p;
        p->side[i].index = i;
        p->side[i].fd = fds[i];
    }
    size_t done = 0, len = (size_t)pending.len;
    while (done < len) {
        ssize_t n = send(fds[1], (char *)pending.buf + done, len - done, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                p->closing = 1; /* the server is gone already: the thread ends the pair at once */
            break;
        }
        done += (size_t)n;
    }
    if (!p->closing && done < len && keep(&p->flow[0], (char *)pending.buf + done, len - done) < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    pthread_mutex_lock(&lock);
    if (ensure_started() < 0) {
        pthread_mutex_unlock(&lock);
        goto fail;
    }
    p->id = next_id++;
    p->next = pairs;
    if (pairs != NULL)
        pairs->prev = p;
    pairs = p;
    p->next_new = incoming; /* from here the pair is the thread's: it registers the sockets */
    incoming = p;
    uint64_t id = p->id;
    pthread_mutex_unlock(&lock);
    PyBuffer_Release(&pending);
    wake(wake_fd);
    return PyLong_FromUnsignedLongLong(id);

fail:
    PyBuffer_Release(&pending);
    if (p != NULL) {
        drop(&p->flow[0]);
        free(p);
    }
    close(fds[0]);
    close(fds[1]);
    return NULL;
}

static PyObject *splice_close(PyObject *module, PyObject *arg) {
    (void)module;
    unsigned long long id = PyLong_AsUnsignedLongLong(arg);
    if (id == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    int found = 0;
    pthread_mutex_lock(&lock);
    for (struct pair *p = pairs; p != NULL; p = p->next) {
        if (p->id == id) {
            shutdown(p->side[0].fd, SHUT_RDWR); /* the thread sees both hang up and ends the pair */
            shutdown(p->side[1].fd, SHUT_RDWR);
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return PyBool_FromLong(found);
}

static PyObject *counts_tuple(uint64_t id, uint64_t c2s, uint64_t s2c) {
    return Py_BuildValue("(KKK)", (unsigned long long)id, (unsigned long long)c2s, (unsigned long long)s2c);
}

static PyObject *splice_snapshot(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    PyObject *list = PyList_New(0);
    if (list == NULL)
        return NULL;
    pthread_mutex_lock(&lock);
    for (struct pair *p = pairs; p != NULL; p = p->next) {
        PyObject *row = counts_tuple(p->id, __atomic_load_n(&p->flow[0].count, __ATOMIC_RELAXED),
                                     __atomic_load_n(&p->flow[1].count, __ATOMIC_RELAXED));
        if (row == NULL || PyList_Append(list, row) < 0) {
            Py_XDECREF(row);
            pthread_mutex_unlock(&lock);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(row);
    }
    pthread_mutex_unlock(&lock);
    return list;
}

static PyObject *splice_ended(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    pthread_mutex_lock(&lock);
    int fd = event_fd;
    pthread_mutex_unlock(&lock);
    if (fd >= 0)
        drain(fd); /* before taking the queue: an end queued after this makes the fd readable again */
    pthread_mutex_lock(&lock);
    size_t n = ended_len;
    struct ended_pair *taken = ended_queue;
    ended_queue = NULL;
    ended_len = ended_cap = 0;
    pthread_mutex_unlock(&lock);
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (list != NULL) {
        for (size_t k = 0; k < n; k++) {
            PyObject *row = counts_tuple(taken[k].id, taken[k].c2s, taken[k].s2c);
            if (row == NULL) {
                Py_CLEAR(list);
                break;
            }
            PyList_SET_ITEM(list, (Py_ssize_t)k, row);
        }
    }
    free(taken);
    return list;
}

static PyObject *splice_notify_fd(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    pthread_mutex_lock(&lock);
    int ok = ensure_started();
    int fd = event_fd;
    pthread_mutex_unlock(&lock);
    if (ok < 0)
        return NULL;
    return PyLong_FromLong(fd);
}

static PyMethodDef methods[] = {
    {"add", splice_add, METH_VARARGS,
     "add(client_fd, server_fd, pending_to_server) -> int\n\nTake both sockets over (they are the relay's to close "
     "from now on, even when this raises), write pending_to_server to the server first, and splice them; returns the "
     "pair's id."},
    {"close", splice_close, METH_O,
     "close(pair_id) -> bool\n\nEnd a pair now (it is reported by ended() once closed); False if it is not live."},
    {"snapshot", splice_snapshot, METH_NOARGS,
     "snapshot() -> list[tuple[int, int, int]]\n\nThe live pairs: (id, bytes read from the client, from the server)."},
    {"ended", splice_ended, METH_NOARGS,
     "ended() -> list[tuple[int, int, int]]\n\nThe pairs that ended since the last call, with their final counts."},
    {"notify_fd", splice_notify_fd, METH_NOARGS,
     "notify_fd() -> int\n\nA descriptor readable while ended() has something to report (starts the relay)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_splice",
    "Forwarded connections spliced by a thread of their own, without the GIL (see _splice.c).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__splice(void) {
    static int atfork_registered;
    if (!atfork_registered) {
        int err = pthread_atfork(before_fork, after_fork_parent, after_fork_child);
        if (err != 0) {
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        atfork_registered = 1;
    }
    return PyModule_Create(&module_def);
}
