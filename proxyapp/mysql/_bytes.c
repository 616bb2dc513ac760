/* The wire's byte work in C: copy a span of a read buffer out as bytes, drop the bytes already read, read a packet's
 * header, frame a payload as one packet, address a prepared statement's packet to a statement id.
 *
 * ``proxyapp.mysql.wire.Wire`` keeps what a connection received in one bytearray. Every query copies a command or a
 * response out of it and, once that is read, drops it from the front. In Python the copy is ``bytes(buf[a:b])``
 * (a bytearray slice, then a bytes object made from it through a generic call) and the drop is ``del buf[:n]``, which
 * gives the memory back whenever less than half of it stays in use, so the next read's bytes allocate it again: four
 * allocations a query where none is needed. Reading a header's four bytes from a bytearray costs compiled Python a
 * generic item lookup and an int object each; framing a payload costs a struct call and a concatenation.
 *
 * ``cut`` makes the bytes object straight from the buffer's memory. ``compact`` moves what is left to the front and
 * keeps the allocation, up to ``KEEP`` bytes: a buffer once grown larger than that by a large packet is shrunk as
 * Python shrinks it, so an idle connection does not hold a large allocation. ``header`` reads the four header bytes
 * as one int. ``frame`` makes the framed packet in one allocation. ``stamp`` writes a statement id into a copy of an
 * execute (or a prepare response) and, for an execute sent without its parameter types, sets the new-params-bound
 * flag and puts the types after it: in Python that is four slices, a struct call and five concatenations a query.
 * ``text`` decodes a command's text from its payload where Python would slice the payload first.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

/* A packet's payload is shorter than this; one this long continues in the next packet. */
#define MAX_PAYLOAD 0xFFFFFF

/* The most a buffer keeps allocated when it holds less than half of it. */
#define KEEP (64 * 1024)

static PyByteArrayObject *as_buffer(PyObject *obj)
{
    if (!PyByteArray_CheckExact(obj)) {
        PyErr_Format(PyExc_TypeError, "a bytearray is required, not %.100s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return (PyByteArrayObject *)obj;
}

static PyObject *cut(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "cut(buf, start, end) takes 3 arguments");
        return NULL;
    }
    PyByteArrayObject *buf = as_buffer(args[0]);
    if (buf == NULL)
        return NULL;
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (end == -1 && PyErr_Occurred())
        return NULL;
    if (start < 0 || end < start || end > Py_SIZE(buf)) {
        PyErr_Format(PyExc_ValueError, "span [%zd, %zd) is not within the buffer's %zd bytes", start, end,
                     Py_SIZE(buf));
        return NULL;
    }
    return PyBytes_FromStringAndSize(buf->ob_start + start, end - start);
}

static PyObject *compact(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "compact(buf, count) takes 2 arguments");
        return NULL;
    }
    PyByteArrayObject *buf = as_buffer(args[0]);
    if (buf == NULL)
        return NULL;
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t size = Py_SIZE(buf);
    if (count < 0 || count > size) {
        PyErr_Format(PyExc_ValueError, "cannot drop %zd of the buffer's %zd bytes", count, size);
        return NULL;
    }
    if (buf->ob_exports > 0) { /* as ``del buf[:n]`` refuses it: a memoryview of the buffer is still alive */
        PyErr_SetString(PyExc_BufferError, "Existing exports of data: object cannot be re-sized");
        return NULL;
    }
    if (count == 0) /* nothing to drop (an empty bytearray may have no memory at all) */
        Py_RETURN_NONE;
    Py_ssize_t left = size - count;
    if (buf->ob_alloc > KEEP && left < buf->ob_alloc / 2) {
        memmove(buf->ob_start, buf->ob_start + count, (size_t)left);
        if (PyByteArray_Resize((PyObject *)buf, left) < 0) /* shrinks the allocation, as Python would */
            return NULL;
        Py_RETURN_NONE;
    }
    memmove(buf->ob_bytes, buf->ob_start + count, (size_t)left);
    buf->ob_start = buf->ob_bytes;
    Py_SET_SIZE(buf, left);
    buf->ob_bytes[left] = '\0'; /* a bytearray's bytes are always followed by a NUL */
    Py_RETURN_NONE;
}

static PyObject *header(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "header(buf, pos) takes 2 arguments");
        return NULL;
    }
    PyByteArrayObject *buf = as_buffer(args[0]);
    if (buf == NULL)
        return NULL;
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    if (pos < 0) {
        PyErr_Format(PyExc_ValueError, "position %zd is before the buffer", pos);
        return NULL;
    }
    if (Py_SIZE(buf) - pos < 4)
        return PyLong_FromLong(-1);
    const unsigned char *p = (const unsigned char *)buf->ob_start + pos;
    return PyLong_FromUnsignedLong((unsigned long)p[0] | (unsigned long)p[1] << 8 | (unsigned long)p[2] << 16 |
                                   (unsigned long)p[3] << 24);
}

static PyObject *frame(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "frame(payload, seq) takes 2 arguments");
        return NULL;
    }
    const char *data;
    Py_ssize_t length;
    if (PyBytes_Check(args[0])) {
        data = PyBytes_AS_STRING(args[0]);
        length = PyBytes_GET_SIZE(args[0]);
    }
    else if (PyByteArray_Check(args[0])) {
        data = PyByteArray_AS_STRING(args[0]);
        length = PyByteArray_GET_SIZE(args[0]);
    }
    else {
        PyErr_Format(PyExc_TypeError, "a bytes payload is required, not %.100s", Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    long seq = PyLong_AsLong(args[1]);
    if (seq == -1 && PyErr_Occurred())
        return NULL;
    if (length >= MAX_PAYLOAD) {
        PyErr_Format(PyExc_ValueError, "a payload of %zd bytes does not fit one packet", length);
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, length + 4);
    if (out == NULL)
        return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    p[0] = (unsigned char)(length & 0xFF);
    p[1] = (unsigned char)((length >> 8) & 0xFF);
    p[2] = (unsigned char)((length >> 16) & 0xFF);
    p[3] = (unsigned char)(seq & 0xFF);
    memcpy(p + 4, data, (size_t)length);
    return out;
}

static PyObject *stamp(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "stamp(data, at, stmt_id, flag_at, types) takes 5 arguments");
        return NULL;
    }
    if (!PyBytes_Check(args[0]) || !PyBytes_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "stamp() takes bytes data and bytes types");
        return NULL;
    }
    const char *data = PyBytes_AS_STRING(args[0]);
    Py_ssize_t length = PyBytes_GET_SIZE(args[0]);
    const char *types = PyBytes_AS_STRING(args[4]);
    Py_ssize_t count = PyBytes_GET_SIZE(args[4]);
    Py_ssize_t at = PyLong_AsSsize_t(args[1]);
    if (at == -1 && PyErr_Occurred())
        return NULL;
    unsigned long stmt_id = PyLong_AsUnsignedLong(args[2]);
    if (stmt_id == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    if (stmt_id > 0xFFFFFFFFUL) {
        PyErr_SetString(PyExc_OverflowError, "a statement id takes 4 bytes");
        return NULL;
    }
    Py_ssize_t flag_at = PyLong_AsSsize_t(args[3]);
    if (flag_at == -1 && PyErr_Occurred())
        return NULL;
    if (at < 0 || at > length - 4) {
        PyErr_Format(PyExc_ValueError, "no 4-byte statement id at %zd of %zd bytes", at, length);
        return NULL;
    }
    if (count && (flag_at < at + 4 || flag_at >= length)) {
        PyErr_Format(PyExc_ValueError, "no bound flag at %zd of %zd bytes", flag_at, length);
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, length + count);
    if (out == NULL)
        return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    if (count == 0) {
        memcpy(p, data, (size_t)length);
    }
    else {
        memcpy(p, data, (size_t)flag_at);
        p[flag_at] = 1;
        memcpy(p + flag_at + 1, types, (size_t)count);
        memcpy(p + flag_at + 1 + count, data + flag_at + 1, (size_t)(length - flag_at - 1));
    }
    p[at] = (unsigned char)(stmt_id & 0xFF);
    p[at + 1] = (unsigned char)((stmt_id >> 8) & 0xFF);
    p[at + 2] = (unsigned char)((stmt_id >> 16) & 0xFF);
    p[at + 3] = (unsigned char)((stmt_id >> 24) & 0xFF);
    return out;
}

static PyObject *text(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "text(data, start) takes bytes and an int");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t length = PyBytes_GET_SIZE(args[0]);
    if (start < 0 || start > length) {
        PyErr_Format(PyExc_ValueError, "no text at %zd of %zd bytes", start, length);
        return NULL;
    }
    return PyUnicode_DecodeUTF8(PyBytes_AS_STRING(args[0]) + start, length - start, "surrogateescape");
}

static PyMethodDef methods[] = {
    {"cut", (PyCFunction)(void (*)(void))cut, METH_FASTCALL,
     "cut(buf, start, end): a copy of buf[start:end] as bytes; ValueError unless 0 <= start <= end <= len(buf)."},
    {"compact", (PyCFunction)(void (*)(void))compact, METH_FASTCALL,
     "compact(buf, count): drop the first ``count`` bytes of ``buf``, keeping its allocation (up to 64 KiB)."},
    {"header", (PyCFunction)(void (*)(void))header, METH_FASTCALL,
     "header(buf, pos): the packet header at ``pos`` as one little-endian int (length, then sequence id in the top "
     "byte), or -1 when its four bytes are not all in."},
    {"frame", (PyCFunction)(void (*)(void))frame, METH_FASTCALL,
     "frame(payload, seq): ``payload`` framed as one packet with sequence id ``seq`` (the low byte); ValueError for a "
     "payload of 16 MiB - 1 bytes or more."},
    {"stamp", (PyCFunction)(void (*)(void))stamp, METH_FASTCALL,
     "stamp(data, at, stmt_id, flag_at, types): ``data`` with the 4-byte statement id at ``at`` set to ``stmt_id``; "
     "with ``types``, the byte at ``flag_at`` set to 1 and ``types`` put after it."},
    {"text", (PyCFunction)(void (*)(void))text, METH_FASTCALL,
     "text(data, start): ``data[start:]`` decoded as UTF-8, a byte that is not as a lone surrogate "
     "(surrogateescape), with no copy of the bytes made first."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_bytes", "The wire's byte work: copy out, drop what was read, read a header, frame, stamp a statement id, decode a command's text.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__bytes(void)
{
    return PyModule_Create(&module);
}
