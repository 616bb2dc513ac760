/* The walk over one whole command response in a backend's read buffer, in one C pass.
 *
 * ``proxyapp.mysql.wire.read_response`` relays a response byte for byte; all it needs to know is where the response
 * ends and what it said (status flags, affected rows, rows, an error). When the whole response already sits in the
 * buffer (a point select's reply arrives in one read), ``walk`` finds that out here, without a Python call per
 * packet. It reads exactly what the Python reader reads and answers only what it is sure of: a response that is not
 * all in, that is longer than ``limit``, that holds a LOCAL INFILE request, a packet the Python reader would refuse
 * as malformed, or a 16 MiB OK or ERR packet is answered None, and the Python reader takes it from the same place.
 *
 * Packets: a 3-byte little-endian payload length, a sequence id, the payload; a payload of 0xFFFFFF bytes continues
 * in the next packet. A response is an OK (0x00), an ERR (0xFF), a LOCAL INFILE request (0xFB, text protocol only)
 * or a result set: the column count, that many column definitions, an EOF, rows, and an EOF or an ERR. An OK's or
 * EOF's status flag MORE_RESULTS_EXISTS says another result follows; CURSOR_EXISTS after the definitions says the
 * rows stay on the server (a prepared statement's cursor).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#define MAX_PACKET 0xFFFFFF
#define MORE_RESULTS 0x0008
#define CURSOR_EXISTS 0x0040
#define STATUS_UNKNOWN (-1)

/* A position in the buffer's bytes [0, end), and the sequence id of the last packet read. */
struct reader {
    const unsigned char *buf;
    Py_ssize_t pos, end;
    int seq;
};

/* Advance over the next wire packet: 1 with its payload's start and length, 0 when it is not all in. */
static int next_packet(struct reader *r, Py_ssize_t *start, Py_ssize_t *length)
{
    if (r->end - r->pos < 4)
        return 0;
    const unsigned char *p = r->buf + r->pos;
    Py_ssize_t n = (Py_ssize_t)p[0] | (Py_ssize_t)p[1] << 8 | (Py_ssize_t)p[2] << 16;
    if (r->end - r->pos - 4 < n)
        return 0;
    r->seq = p[3];
    *start = r->pos + 4;
    *length = n;
    r->pos += 4 + n;
    return 1;
}

/* Advance over the parts that continue a packet of ``length`` bytes (none unless it is MAX_PACKET); 0 when they are
 * not all in. */
static int skip_continuation(struct reader *r, Py_ssize_t length)
{
    Py_ssize_t start;
    while (length == MAX_PACKET)
        if (!next_packet(r, &start, &length))
            return 0;
    return 1;
}

/* Read a length-encoded integer at ``*pos`` (below ``end``): 1 with its value, 0 when it is NULL, truncated or has
 * an invalid prefix (the Python reader decides those). */
static int lenenc(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, uint64_t *value)
{
    Py_ssize_t p = *pos;
    if (p >= end)
        return 0;
    unsigned first = b[p];
    int size;
    if (first < 0xFB) {
        *value = first;
        *pos = p + 1;
        return 1;
    }
    if (first == 0xFC)
        size = 2;
    else if (first == 0xFD)
        size = 3;
    else if (first == 0xFE)
        size = 8;
    else
        return 0;
    if (end - p - 1 < size)
        return 0;
    uint64_t v = 0;
    for (int i = size; i >= 1; i--)
        v = v << 8 | b[p + i];
    *value = v;
    *pos = p + 1 + size;
    return 1;
}

/* What a response said, summed over its results (``wire.Response``). */
struct outcome {
    long status;
    uint64_t affected_rows, last_insert_id, rows;
    long warnings, result_sets;
    int cursor;
    Py_ssize_t error_start, error_length;
};

/* One result set whose column count packet is at [start, start + length): 1 when it was read whole (up to its
 * closing EOF or ERR, or a cursor's EOF), 0 when the Python reader must take the response. */
static int result_set(struct reader *r, struct outcome *out, Py_ssize_t start, Py_ssize_t length)
{
    const unsigned char *b = r->buf;
    uint64_t count;
    Py_ssize_t pos = start;
    if (length == MAX_PACKET || !lenenc(b, &pos, start + length, &count) || count == 0)
        return 0;
    out->result_sets++;
    for (uint64_t i = 0; i < count; i++)
        if (!next_packet(r, &start, &length) || !skip_continuation(r, length))
            return 0;
    if (!next_packet(r, &start, &length) || !(length && b[start] == 0xFE && length < 9))
        return 0;
    long status = length >= 5 ? (long)(b[start + 3] | b[start + 4] << 8) : 0;
    if (status & CURSOR_EXISTS) {
        out->status = status;
        out->cursor = 1;
        return 1;
    }
    uint64_t rows = 0;
    for (;;) {
        if (!next_packet(r, &start, &length))
            return 0;
        unsigned first = length ? b[start] : 0;
        if (first == 0xFE && length < 9) {
            out->status = length >= 5 ? (long)(b[start + 3] | b[start + 4] << 8) : 0;
            out->warnings = length >= 3 ? (long)(b[start + 1] | b[start + 2] << 8) : 0;
            break;
        }
        if (first == 0xFF && length < MAX_PACKET) {
            out->error_start = start;
            out->error_length = length;
            out->status = STATUS_UNKNOWN;
            break;
        }
        rows++;
        if (!skip_continuation(r, length))
            return 0;
    }
    out->rows += rows;
    return 1;
}

/* An OK packet at [start, start + length): 1 when its counts and flags were read. */
static int ok_packet(const unsigned char *b, struct outcome *out, Py_ssize_t start, Py_ssize_t length)
{
    Py_ssize_t pos = start + 1, end = start + length;
    uint64_t affected, insert_id;
    if (length == MAX_PACKET || !lenenc(b, &pos, end, &affected) || !lenenc(b, &pos, end, &insert_id) ||
        end - pos < 4 || affected > UINT64_MAX - out->affected_rows)
        return 0;
    out->status = b[pos] | b[pos + 1] << 8;
    out->warnings = b[pos + 2] | b[pos + 3] << 8;
    out->affected_rows += affected;
    if (insert_id)
        out->last_insert_id = insert_id;
    return 1;
}

/* The whole response from ``r->pos``: 1 when it was read to its end, 0 when the Python reader must take it. */
static int response(struct reader *r, struct outcome *out, int binary)
{
    const unsigned char *b = r->buf;
    Py_ssize_t start, length;
    for (;;) {
        if (!next_packet(r, &start, &length))
            return 0;
        unsigned first = length ? b[start] : 0;
        if (first == 0x00 && length >= 7) {
            if (!ok_packet(b, out, start, length))
                return 0;
        } else if (first == 0xFF) {
            if (length == MAX_PACKET)
                return 0;
            out->error_start = start;
            out->error_length = length;
            out->status = STATUS_UNKNOWN;
            return 1;
        } else if (first == 0xFB && !binary) {
            return 0; /* LOCAL INFILE: the Python reader relays the file */
        } else if (!result_set(r, out, start, length)) {
            return 0;
        }
        if (!(out->status & MORE_RESULTS) || out->error_length >= 0 || out->cursor)
            return 1;
    }
}

static PyObject *walk(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "walk(buf, pos, binary, limit) takes 4 arguments");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    int binary = PyObject_IsTrue(args[2]);
    if (binary < 0)
        return NULL;
    Py_ssize_t limit = PyLong_AsSsize_t(args[3]);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (pos < 0 || pos > view.len || limit < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "walk: position or limit out of range");
        return NULL;
    }
    struct reader r = {view.buf, pos, view.len - pos > limit ? pos + limit : view.len, -1};
    struct outcome out = {STATUS_UNKNOWN, 0, 0, 0, 0, 0, 0, 0, -1};
    int whole = response(&r, &out, binary);
    PyBuffer_Release(&view);
    if (!whole)
        Py_RETURN_NONE;
    PyObject *fields[] = {
        PyLong_FromSsize_t(r.pos),
        PyLong_FromLong(r.seq),
        PyLong_FromLong(out.status),
        PyLong_FromLong(out.cursor),
        PyLong_FromUnsignedLongLong(out.affected_rows),
        PyLong_FromUnsignedLongLong(out.last_insert_id),
        PyLong_FromUnsignedLongLong(out.rows),
        PyLong_FromLong(out.warnings),
        PyLong_FromLong(out.result_sets),
        PyLong_FromSsize_t(out.error_start),
        PyLong_FromSsize_t(out.error_length),
    };
    const Py_ssize_t count = (Py_ssize_t)(sizeof fields / sizeof fields[0]);
    PyObject *walked = PyTuple_New(count);
    for (Py_ssize_t i = 0; i < count; i++) {
        if (fields[i] == NULL || walked == NULL) { /* out of memory: drop what was made */
            for (Py_ssize_t j = i; j < count; j++)
                Py_XDECREF(fields[j]);
            Py_XDECREF(walked);
            return NULL;
        }
        PyTuple_SET_ITEM(walked, i, fields[i]);
    }
    return walked;
}

static PyMethodDef methods[] = {
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL,
     "walk(buf, pos, binary, limit): where the response at ``pos`` ends and what it said, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_walk", "The walk over a whole command response in a read buffer.", -1, methods, NULL,
    NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__walk(void)
{
    return PyModule_Create(&module);
}
