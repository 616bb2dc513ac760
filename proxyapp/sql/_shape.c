/* A query's shape in C: ``proxyapp.sql.digest.simple_shape`` over an ASCII text, its bare numbers replaced.
 *
 * The rules are the Python function's (see its docstring), over the same character classes: a decimal digit; a
 * character that makes the text not simple (a quote, a comment or sign character, a backslash); one that glues to a
 * number that follows it ('$', '?'); '.'; 'e' or 'E'; another word character; anything else. A bare number is a run of
 * digits, with an optional fraction, that does not follow a word character, '.', '$' or '?' and is not followed by a
 * word character or '.'. The Python function stays the reference, and reads every text that is not ASCII (``shape`` calls it, the
 * ``other`` it is given, for those).
 *
 * ``known`` and ``keep`` hold what ``proxyapp.sql.analysis`` works out once per shape, in a table of this module's
 * looked up by the shape's bytes (see ``Slot``): Python's twin is a dict keyed by the shape's str.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

enum { C_OTHER, C_DIGIT, C_REFUSED, C_PREFIX, C_DOT, C_EXPONENT, C_WORD };

static unsigned char classes[128];
/* 1 for a digit or a refused character, where the scan for numbers stops; 0 for the rest, skipped. */
static unsigned char stops[128];

static void fill_classes(void)
{
    for (int c = 0; c < 128; c++) {
        unsigned char k = C_OTHER;
        if (c >= '0' && c <= '9')
            k = C_DIGIT;
        else if (c && strchr("'\"`#/\\+-", c))
            k = C_REFUSED;
        else if (c == '$' || c == '?')
            k = C_PREFIX;
        else if (c == '.')
            k = C_DOT;
        else if (c == 'e' || c == 'E')
            k = C_EXPONENT;
        else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
            k = C_WORD;
        classes[c] = k;
        stops[c] = k == C_DIGIT || k == C_REFUSED;
    }
}

/* The end of the run of digits at ``i``; -1 if an exponent follows it. */
static Py_ssize_t digits_end(const unsigned char *s, Py_ssize_t i, Py_ssize_t n)
{
    while (i < n && classes[s[i]] == C_DIGIT)
        i++;
    if (i < n && classes[s[i]] == C_EXPONENT)
        return -1;
    return i;
}

/* The bare numbers of the ASCII text ``s[0:n]``: (start, end) pairs into ``*spans`` (``stack``, of ``STACK_SPANS``
 * entries, until it is outgrown: then memory of PyMem_Malloc's, which the caller frees); their number of entries, and
 * the characters they hold in ``*removed``. -1 when the text is not simple, -2 with an exception set. */
#define STACK_SPANS 64
static Py_ssize_t find_numbers(const unsigned char *s, Py_ssize_t n, Py_ssize_t *stack, Py_ssize_t **spans,
                               Py_ssize_t *removed)
{
    Py_ssize_t cap = STACK_SPANS, count = 0;
    Py_ssize_t i = 0;
    *spans = stack;
    *removed = 0;
    while (i < n) {
        /* Most characters are neither digits nor refused: skipped four at a time, then one at a time. */
        while (i + 4 <= n && !(stops[s[i]] | stops[s[i + 1]] | stops[s[i + 2]] | stops[s[i + 3]]))
            i += 4;
        while (i < n && !stops[s[i]])
            i++;
        if (i == n)
            break;
        if (classes[s[i]] == C_REFUSED)
            return -1;
        /* glued to what is before it (a word, a prefix, a dot); never a digit, whose whole run was read */
        int glued = i > 0 && classes[s[i - 1]] >= C_PREFIX;
        Py_ssize_t end = digits_end(s, i + 1, n);
        if (end < 0)
            return -1;
        if (!glued && end + 1 < n && classes[s[end]] == C_DOT && classes[s[end + 1]] == C_DIGIT) {
            end = digits_end(s, end + 1, n);
            if (end < 0)
                return -1;
        }
        if (!glued && (end >= n || classes[s[end]] < C_DOT)) {
            if (count + 2 > cap) {
                Py_ssize_t *grown = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)cap * 2);
                if (grown == NULL) {
                    PyErr_NoMemory();
                    return -2;
                }
                memcpy(grown, *spans, sizeof(Py_ssize_t) * (size_t)count);
                if (*spans != stack)
                    PyMem_Free(*spans);
                *spans = grown;
                cap *= 2;
            }
            (*spans)[count++] = i;
            (*spans)[count++] = end;
            *removed += end - i;
        }
        i = end;
    }
    return count;
}

/* The text ``s[0:n]`` with the numbers of ``spans`` (``count`` entries) replaced by ``lit``, written at ``out``. */
static void write_shape(unsigned char *out, const unsigned char *s, Py_ssize_t n, const Py_ssize_t *spans,
                        Py_ssize_t count, const unsigned char *lit, Py_ssize_t lit_len)
{
    Py_ssize_t copied = 0;
    for (Py_ssize_t j = 0; j < count; j += 2) {
        memcpy(out, s + copied, (size_t)(spans[j] - copied));
        out += spans[j] - copied;
        memcpy(out, lit, (size_t)lit_len);
        out += lit_len;
        copied = spans[j + 1];
    }
    memcpy(out, s + copied, (size_t)(n - copied));
}

static PyObject *shape(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "shape(sql, literal, other) takes two str and a callable");
        return NULL;
    }
    PyObject *sql = args[0], *literal = args[1];
    if (PyUnicode_READY(sql) < 0 || PyUnicode_READY(literal) < 0)
        return NULL;
    if (!PyUnicode_IS_ASCII(sql) || !PyUnicode_IS_ASCII(literal))  /* the Python rules read every other text */
        return PyObject_Vectorcall(args[2], args, 2, NULL);
    const unsigned char *s = PyUnicode_1BYTE_DATA(sql);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(sql);
    const unsigned char *lit = PyUnicode_1BYTE_DATA(literal);
    const Py_ssize_t lit_len = PyUnicode_GET_LENGTH(literal);
    Py_ssize_t stack[STACK_SPANS], *spans, removed;
    Py_ssize_t count = find_numbers(s, n, stack, &spans, &removed);
    PyObject *result = NULL;
    if (count == -1) {
        result = Py_NewRef(Py_None);
    } else if (count == 0) {
        result = Py_NewRef(sql);
    } else if (count > 0) {
        result = PyUnicode_New(n - removed + (count / 2) * lit_len, 127);
        if (result != NULL)
            write_shape(PyUnicode_1BYTE_DATA(result), s, n, spans, count, lit, lit_len);
    }
    if (spans != stack)
        PyMem_Free(spans);
    return result;
}

/* The shapes seen, each with what the caller keeps for it (``known``, ``keep``), found by the shape's UTF-8 bytes:
 * a query whose shape was seen is answered without its shape made as a str, hashed and looked up in a dict. An
 * open-addressing table: a shape is looked for in the ``PROBES`` slots from its hash's (``shape_hash``), a free slot
 * ending the search (slots are never freed, only reused); when all of them hold other shapes, ``keep`` replaces the first.
 * A search compares at most ``PROBES`` shapes, whatever texts clients send. */
#define SLOTS 8192
#define PROBES 8
#define SHAPE_ON_STACK 2048

typedef struct {
    uint64_t hash;
    Py_ssize_t length;
    char *text; /* the shape's bytes (``shape_bytes``, PyMem_Malloc's); NULL: a free slot */
    PyObject *value;
} Slot;

static Slot slots[SLOTS];

/* A hash of ``s[0:n]`` read eight bytes at a time, each word mixed in with a multiplication (as FNV-1a does a byte). */
static uint64_t shape_hash(const unsigned char *s, Py_ssize_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)n;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, s + i, 8);
        h = (h ^ word) * 0x9e3779b97f4a7c15ULL;
        h ^= h >> 29;
    }
    uint64_t tail = 0;
    memcpy(&tail, s + i, (size_t)(n - i));
    h = (h ^ tail) * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 32);
}

/* The slot holding the shape ``text[0:length]`` of hash ``hash``; else NULL, with ``*free`` the first free slot of its
 * probes (or NULL: all taken). */
static Slot *find(uint64_t hash, const char *text, Py_ssize_t length, Slot **free)
{
    size_t at = (size_t)hash;
    *free = NULL;
    for (int p = 0; p < PROBES; p++) {
        Slot *slot = &slots[(at + (size_t)p) & (SLOTS - 1)];
        if (slot->text == NULL) {
            *free = slot;
            return NULL;
        }
        if (slot->hash == hash && slot->length == length && memcmp(slot->text, text, (size_t)length) == 0)
            return slot;
    }
    return NULL;
}

/* The bytes ``shape`` (a str) is kept by, ``length`` of them: its UTF-8, or, for a shape holding lone surrogates (the
 * bytes of a query that are not UTF-8, decoded with surrogateescape), which have no UTF-8, its bytes with each surrogate
 * in three (surrogatepass: never the UTF-8 of another text) held by ``*owner`` (a new reference the caller drops; NULL
 * when the str holds them). NULL with an exception set when neither can be had. */
static const char *shape_bytes(PyObject *shape, Py_ssize_t *length, PyObject **owner)
{
    *owner = NULL;
    const char *text = PyUnicode_AsUTF8AndSize(shape, length);
    if (text != NULL || !PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
        return text;
    PyErr_Clear();
    *owner = PyUnicode_AsEncodedString(shape, "utf-8", "surrogatepass");
    if (*owner == NULL)
        return NULL;
    *length = PyBytes_GET_SIZE(*owner);
    return PyBytes_AS_STRING(*owner);
}

/* What ``keep`` kept for ``shape`` (a str) if anything, else ``shape`` itself (a new reference either way). */
static PyObject *kept_or(PyObject *shape)
{
    Py_ssize_t length;
    PyObject *owner;
    const char *text = shape_bytes(shape, &length, &owner);
    if (text == NULL) {
        Py_DECREF(shape);
        return NULL;
    }
    Slot *free;
    Slot *slot = find(shape_hash((const unsigned char *)text, length), text, length, &free);
    Py_XDECREF(owner);
    if (slot == NULL)
        return shape;
    Py_DECREF(shape);
    return Py_NewRef(slot->value);
}

static PyObject *known(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "known(sql, other) takes a str and a callable");
        return NULL;
    }
    PyObject *sql = args[0];
    if (PyUnicode_READY(sql) < 0)
        return NULL;
    if (!PyUnicode_IS_ASCII(sql)) { /* the Python rules shape it; the table is looked up by the shape they give */
        PyObject *other = PyObject_Vectorcall(args[1], args, 1, NULL);
        if (other == NULL || other == Py_None)
            return other;
        if (!PyUnicode_Check(other)) {
            Py_DECREF(other);
            PyErr_SetString(PyExc_TypeError, "other(sql) must return a str or None");
            return NULL;
        }
        return kept_or(other);
    }
    const unsigned char *s = PyUnicode_1BYTE_DATA(sql);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(sql);
    Py_ssize_t stack[STACK_SPANS], *spans, removed;
    Py_ssize_t count = find_numbers(s, n, stack, &spans, &removed);
    PyObject *result = NULL;
    if (count == -1) {
        result = Py_NewRef(Py_None);
    } else if (count == 0) {
        result = kept_or(Py_NewRef(sql));
    } else if (count > 0) {
        Py_ssize_t length = n - removed + count / 2;
        unsigned char on_stack[SHAPE_ON_STACK];
        unsigned char *text = length <= SHAPE_ON_STACK ? on_stack : PyMem_Malloc((size_t)length);
        if (text == NULL) {
            PyErr_NoMemory();
        } else {
            write_shape(text, s, n, spans, count, (const unsigned char *)"?", 1);
            Slot *free;
            Slot *slot = find(shape_hash(text, length), (const char *)text, length, &free);
            if (slot != NULL) {
                result = Py_NewRef(slot->value);
            } else {
                result = PyUnicode_New(length, 127);
                if (result != NULL)
                    memcpy(PyUnicode_1BYTE_DATA(result), text, (size_t)length);
            }
            if (text != on_stack)
                PyMem_Free(text);
        }
    }
    if (spans != stack)
        PyMem_Free(spans);
    return result;
}

static PyObject *keep(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "keep(shape, value) takes a str and an object");
        return NULL;
    }
    Py_ssize_t length;
    PyObject *owner;
    const char *text = shape_bytes(args[0], &length, &owner);
    if (text == NULL)
        return NULL;
    uint64_t hash = shape_hash((const unsigned char *)text, length);
    Slot *free;
    Slot *slot = find(hash, text, length, &free);
    PyObject *old = NULL;
    if (slot == NULL) {
        slot = free != NULL ? free : &slots[(size_t)hash & (SLOTS - 1)];
        char *copy = PyMem_Malloc(length > 0 ? (size_t)length : 1);
        if (copy == NULL) {
            Py_XDECREF(owner);
            return PyErr_NoMemory();
        }
        memcpy(copy, text, (size_t)length);
        if (slot->text != NULL)
            PyMem_Free(slot->text);
        slot->text = copy;
        slot->length = length;
        slot->hash = hash;
    }
    Py_XDECREF(owner);
    old = slot->value;
    slot->value = Py_NewRef(args[1]);
    Py_XDECREF(old); /* last: the table is whole again whatever its release runs */
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"shape", (PyCFunction)(void (*)(void))shape, METH_FASTCALL,
     "shape(sql, literal, other): ``simple_shape`` of ``sql``: its bare numbers replaced by ``literal``, or None; "
     "``other(sql, literal)`` when either is not ASCII."},
    {"known", (PyCFunction)(void (*)(void))known, METH_FASTCALL,
     "known(sql, other): None when ``sql`` has no simple shape (``other(sql)`` shapes a text that is not ASCII); else "
     "what ``keep`` kept for its shape, or the shape (a str) when nothing is kept for it."},
    {"keep", (PyCFunction)(void (*)(void))keep, METH_FASTCALL,
     "keep(shape, value): keep ``value`` for ``shape`` (replacing what was kept for it, or for another shape when "
     "its slots are taken)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_shape", "A query's shape in C, and the shapes seen.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__shape(void)
{
    fill_classes();
    return PyModule_Create(&module);
}
