/* A wire's socket reads and writes, made directly and without giving up the GIL.
 *
 * uvloop's ``transport.write`` spends about a thousand instructions on a small write before its system call: a write
 * context object, a buffer export, libuv's request bookkeeping and the protocol's flow control. A query writes twice
 * (the command to its backend, the reply to its client), and nearly always to a socket whose transport has nothing
 * queued and whose kernel buffer takes the whole write. ``send_now`` makes that system call directly and says how
 * much the kernel took; ``proxyapp.mysql.wire.Wire`` hands the rest (all of it, when the socket would block or failed)
 * to its transport, which then orders, buffers, flow-controls and reports errors.
 *
 * A uvloop stream read takes and gives back the GIL twice (once to lend libuv a buffer, once to hand the bytes
 * over), makes a bytes object and calls the protocol, which copies it onto the wire's buffer. ``recv_append`` is what
 * ``proxyapp.mysql.stream.SocketTransport`` does instead, from the loop's readiness callback: one ``recv`` into a
 * buffer of its own, appended to the wire's bytearray.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

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
    /* Would block, or failed: the transport takes all of it, and meets (and reports) the same error itself. */
    return PyLong_FromSsize_t(sent < 0 ? 0 : sent);
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
    ssize_t got;
    do {
        got = recv(fd, chunk, CHUNK, MSG_DONTWAIT);
    } while (got < 0 && errno == EINTR);
    if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return PyLong_FromLong(-1);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (got > 0) {
        Py_ssize_t had = PyByteArray_GET_SIZE(buffer);
        if (PyByteArray_Resize(buffer, had + got) < 0)
            return NULL;
        memcpy(PyByteArray_AS_STRING(buffer) + had, chunk, (size_t)got);
    }
    return PyLong_FromSsize_t(got);
}

static PyMethodDef methods[] = {
    {"send_now", (PyCFunction)(void (*)(void))send_now, METH_FASTCALL,
     "send_now(fd, data): send ``data`` on socket ``fd`` without blocking; how many bytes the kernel took (0 when it "
     "would block, the send failed or ``data`` is not bytes)."},
    {"recv_append", (PyCFunction)(void (*)(void))recv_append, METH_FASTCALL,
     "recv_append(fd, buffer): read what socket ``fd`` holds (up to 256 KiB) without blocking and append it to the "
     "bytearray ``buffer``; the bytes read, 0 at the end of the stream, -1 when there is nothing to read. OSError "
     "when the read fails."},
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
