/* A wire's socket reads and writes, made directly and without giving up the GIL.
 *
 * uvloop's ``transport.write`` spends about a thousand instructions on a small write before its system call: a write
 * context object, a buffer export, libuv's request bookkeeping and the protocol's flow control. A query writes twice
 * (the command to its backend, the reply to its client), and nearly always to a socket whose transport has nothing
 * queued and whose kernel buffer takes the whole write. ``send_now`` makes that system call directly and says how
 * much the kernel took; ``proxyapp.mysql.wire.Wire`` hands the rest (all of it, when the socket would block or failed)
 * to its transport, which then orders, buffers, flow-controls and reports errors. Two of them send without a bytes
 * object made for the write first: ``send_framed`` a command with its packet header (one ``sendmsg`` of the header
 * and the payload), ``send_span`` a response straight from the read buffer of the wire it came on.
 *
 * A uvloop stream read takes and gives back the GIL twice (once to lend libuv a buffer, once to hand the bytes
 * over), makes a bytes object and calls the protocol, which copies it onto the wire's buffer. ``recv_append`` is what
 * ``proxyapp.mysql.stream.SocketTransport`` does instead, from the loop's readiness callback: one ``recv`` into a
 * buffer of its own, appended to the wire's bytearray; or, when the bytearray's allocation has room past its bytes
 * (one a large response grew keeps it), straight into that room, with no copy.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* What one read takes at most: as much as uvloop's own read buffer. Shared: the GIL is held while it is in use. */
#define CHUNK (256 * 1024)
static char chunk[CHUNK];

static int fd_of(PyObject *arg, int *fd)
{
    long value = PyLong_AsLong(arg);
    if (value == -1 && PyErr_Occurred())
        return -1;
    *fd = (int)value;
    return 0;
}

/* What a send said, as the callers want it: the bytes the kernel took, 0 when it would block or failed (the
 * transport then takes all of it, and meets and reports the same error itself). */
static PyObject *sent_count(ssize_t sent)
{
    return PyLong_FromSsize_t(sent < 0 ? 0 : sent);
}

static PyObject *send_now(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    int fd;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "send_now(fd, data) takes 2 arguments");
        return NULL;
    }
    if (fd_of(args[0], &fd) < 0)
        return NULL;
    if (!PyBytes_CheckExact(args[1]))  /* not bytes (a bytearray, say): the transport takes it */
        return PyLong_FromLong(0);
    const char *data = PyBytes_AS_STRING(args[1]);
    Py_ssize_t length = PyBytes_GET_SIZE(args[1]);
    ssize_t sent;
    do {
        sent = send(fd, data, (size_t)length, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (sent < 0 && errno == EINTR);
    return sent_count(sent);
}

static PyObject *send_span(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    int fd;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "send_span(fd, buffer, start, end) takes 4 arguments");
        return NULL;
    }
    if (fd_of(args[0], &fd) < 0)
        return NULL;
    if (!PyByteArray_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "send_span: the buffer must be a bytearray");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t end = PyLong_AsSsize_t(args[3]);
    if (end == -1 && PyErr_Occurred())
        return NULL;
    if (start < 0 || end < start || end > PyByteArray_GET_SIZE(args[1])) {
        PyErr_SetString(PyExc_ValueError, "send_span: the span is not within the buffer");
        return NULL;
    }
    const char *data = PyByteArray_AS_STRING(args[1]) + start;
    ssize_t sent;
    do {
        sent = send(fd, data, (size_t)(end - start), MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (sent < 0 && errno == EINTR);
    return sent_count(sent);
}

/* The largest payload one packet carries: 2^24 - 1 bytes; a longer one is split (``packets.frame``). */
#define MAX_PAYLOAD 0xFFFFFF

static PyObject *send_framed(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    int fd;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "send_framed(fd, payload, seq) takes 3 arguments");
        return NULL;
    }
    if (fd_of(args[0], &fd) < 0)
        return NULL;
    if (!PyBytes_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "send_framed: the payload must be bytes");
        return NULL;
    }
    long seq = PyLong_AsLong(args[2]);
    if (seq == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t length = PyBytes_GET_SIZE(args[1]);
    if (length >= MAX_PAYLOAD) {
        PyErr_SetString(PyExc_ValueError, "send_framed: a payload of 16 MiB or more is sent in several packets");
        return NULL;
    }
    unsigned char header[4] = {
        (unsigned char)(length & 0xFF), (unsigned char)((length >> 8) & 0xFF), (unsigned char)((length >> 16) & 0xFF),
        (unsigned char)(seq & 0xFF),
    };
    struct iovec parts[2] = {
        {.iov_base = header, .iov_len = 4},
        {.iov_base = PyBytes_AS_STRING(args[1]), .iov_len = (size_t)length},
    };
    struct msghdr message = {.msg_iov = parts, .msg_iovlen = length ? 2 : 1};
    ssize_t sent;
    do {
        sent = sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (sent < 0 && errno == EINTR);
    return sent_count(sent);
}

/* A read buffer's room past its bytes that is worth reading into directly. */
#define DIRECT_MIN 4096

/* What ``recv_append`` says of a read that took no byte (``got`` <= 0): 0 at the end of the stream, -1 when there is
 * nothing to read, OSError when the read failed. */
static PyObject *recv_outcome(ssize_t got)
{
    if (got == 0)
        return PyLong_FromLong(0);
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return PyLong_FromLong(-1);
    return PyErr_SetFromErrno(PyExc_OSError);
}

static PyObject *recv_append(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    int fd;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "recv_append(fd, buffer) takes 2 arguments");
        return NULL;
    }
    if (fd_of(args[0], &fd) < 0)
        return NULL;
    PyObject *buffer = args[1];
    if (!PyByteArray_CheckExact(buffer)) {
        PyErr_SetString(PyExc_TypeError, "recv_append: the buffer must be a bytearray");
        return NULL;
    }
    /* Straight into the buffer when its allocation has room enough past its bytes (a buffer a large response grew
     * keeps its allocation, ``_bytes.compact``): no copy from ``chunk``. One byte stays for the NUL that follows a
     * bytearray's bytes. When that room is filled, what else the socket holds is read as below, onto the end. */
    PyByteArrayObject *buf = (PyByteArrayObject *)buffer;
    Py_ssize_t had = Py_SIZE(buf);
    Py_ssize_t room = 0;
    if (buf->ob_bytes != NULL && buf->ob_exports == 0)
        room = buf->ob_alloc - (buf->ob_start - buf->ob_bytes) - had - 1;
    ssize_t direct = 0;
    if (room >= DIRECT_MIN) {
        do {
            direct = recv(fd, buf->ob_start + had, (size_t)room, MSG_DONTWAIT);
        } while (direct < 0 && errno == EINTR);
        if (direct <= 0)
            return recv_outcome(direct);
        had += direct;
        Py_SET_SIZE(buf, had);
        buf->ob_start[had] = '\0';
        if (direct < room)
            return PyLong_FromSsize_t(direct);
    }
    ssize_t got;
    do {
        got = recv(fd, chunk, CHUNK, MSG_DONTWAIT);
    } while (got < 0 && errno == EINTR);
    if (got <= 0) /* after bytes read into the room, an end or a failure is met at the next read */
        return direct > 0 ? PyLong_FromSsize_t(direct) : recv_outcome(got);
    if (PyByteArray_Resize(buffer, had + got) < 0)
        return NULL;
    memcpy(PyByteArray_AS_STRING(buffer) + had, chunk, (size_t)got);
    return PyLong_FromSsize_t(direct + got);
}

static PyMethodDef methods[] = {
    {"send_now", (PyCFunction)(void (*)(void))send_now, METH_FASTCALL,
     "send_now(fd, data): send ``data`` on socket ``fd`` without blocking; how many bytes the kernel took (0 when it "
     "would block, the send failed or ``data`` is not bytes)."},
    {"send_span", (PyCFunction)(void (*)(void))send_span, METH_FASTCALL,
     "send_span(fd, buffer, start, end): send ``buffer[start:end]`` (a bytearray) on socket ``fd`` without blocking "
     "and without copying it out first; how many bytes the kernel took (0 when it would block or the send failed)."},
    {"send_framed", (PyCFunction)(void (*)(void))send_framed, METH_FASTCALL,
     "send_framed(fd, payload, seq): send ``payload`` (bytes, under 16 MiB) as one packet with sequence id ``seq`` "
     "(its low byte) on socket ``fd`` without blocking: its header and it in one system call, with no framed copy "
     "made; how many of the 4 + len(payload) bytes the kernel took (0 when it would block or the send failed)."},
    {"recv_append", (PyCFunction)(void (*)(void))recv_append, METH_FASTCALL,
     "recv_append(fd, buffer): read what socket ``fd`` holds (up to 256 KiB more than the room left in the "
     "bytearray ``buffer``'s allocation, read into directly when there is enough of it) without blocking and append "
     "it to ``buffer``; the bytes read, 0 at the end of the stream, -1 when there is nothing to read. OSError when "
     "the read fails."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sockio", "A wire's socket reads and writes, made directly.", -1, methods, NULL, NULL,
    NULL, NULL,
};

PyMODINIT_FUNC PyInit__sockio(void)
{
    return PyModule_Create(&module);
}
