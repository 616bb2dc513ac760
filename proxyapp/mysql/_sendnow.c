/* A wire's write straight to its socket, for when the transport holds nothing back.
 *
 * uvloop's ``transport.write`` spends about a thousand instructions on a small write before its system call: a write
 * context object, a buffer export, libuv's request bookkeeping and the protocol's flow control. A query writes twice
 * (the command to its backend, the reply to its client), and nearly always to a socket whose transport has nothing
 * queued and whose kernel buffer takes the whole write. ``send_now`` makes that system call directly and says how
 * much the kernel took; ``proxyapp.mysql.wire.Wire`` hands the rest (all of it, when the socket would block or failed)
 * to the transport, which then orders, buffers, flow-controls and reports errors as it always does.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <sys/socket.h>

static PyObject *send_now(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "send_now(fd, data) takes 2 arguments");
        return NULL;
    }
    long fd = PyLong_AsLong(args[0]);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (!PyBytes_CheckExact(args[1]))  /* not bytes (a bytearray, say): the transport takes it */
        return PyLong_FromLong(0);
    const char *data = PyBytes_AS_STRING(args[1]);
    Py_ssize_t length = PyBytes_GET_SIZE(args[1]);
    ssize_t sent;
    do {
        sent = send((int)fd, data, (size_t)length, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (sent < 0 && errno == EINTR);
    /* Would block, or failed: the transport takes all of it, and meets (and reports) the same error itself. */
    return PyLong_FromSsize_t(sent < 0 ? 0 : sent);
}

static PyMethodDef methods[] = {
    {"send_now", (PyCFunction)(void (*)(void))send_now, METH_FASTCALL,
     "send_now(fd, data): send ``data`` on socket ``fd`` without blocking; how many bytes the kernel took (0 when it "
     "would block, the send failed or ``data`` is not bytes)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sendnow", "A wire's write straight to its socket.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__sendnow(void)
{
    return PyModule_Create(&module);
}
