/* A query's shape in C: ``proxyapp.sql.digest.simple_shape`` over an ASCII text, its bare numbers replaced.
 *
 * The rules are the Python function's (see its docstring), over the same character classes: a decimal digit; a
 * character that makes the text not simple (a quote, a comment or sign character, a backslash); one that glues to a
 * number that follows it ('$', '?'); '.'; 'e' or 'E'; another word character; anything else. A bare number is a run of
 * digits, with an optional fraction, that does not follow a word character, '.', '$' or '?' and is not followed by a
 * word character or '.'. The Python function stays the reference, and reads every text that is not ASCII (``shape`` calls it, the
 * ``other`` it is given, for those).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

enum { C_OTHER, C_DIGIT, C_REFUSED, C_PREFIX, C_DOT, C_EXPONENT, C_WORD };

static unsigned char classes[128];

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
    /* First pass: where the bare numbers are (their starts and ends, in a buffer grown as needed). */
    Py_ssize_t stack[64], *spans = stack, cap = 64, count = 0, removed = 0;
    int glued = 0;
    Py_ssize_t i = 0;
    PyObject *result = NULL;
    while (i < n) {
        unsigned char k = classes[s[i]];
        if (k != C_DIGIT) {
            if (k == C_REFUSED)
                goto none;
            glued = k >= C_PREFIX;
            i++;
            continue;
        }
        Py_ssize_t end = digits_end(s, i + 1, n);
        if (end < 0)
            goto none;
        if (!glued && end + 1 < n && classes[s[end]] == C_DOT && classes[s[end + 1]] == C_DIGIT) {
            end = digits_end(s, end + 1, n);
            if (end < 0)
                goto none;
        }
        if (!glued && (end >= n || classes[s[end]] < C_DOT)) {
            if (count + 2 > cap) {
                Py_ssize_t *grown = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)cap * 2);
                if (grown == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                memcpy(grown, spans, sizeof(Py_ssize_t) * (size_t)count);
                if (spans != stack)
                    PyMem_Free(spans);
                spans = grown;
                cap *= 2;
            }
            spans[count++] = i;
            spans[count++] = end;
            removed += end - i;
        }
        glued = 1; /* a digit is a word character */
        i = end;
    }
    if (count == 0) {
        Py_INCREF(sql);
        result = sql;
        goto done;
    }
    /* Second pass: the text between the numbers, and the literal in place of each. */
    result = PyUnicode_New(n - removed + (count / 2) * lit_len, 127);
    if (result == NULL)
        goto done;
    unsigned char *out = PyUnicode_1BYTE_DATA(result);
    Py_ssize_t copied = 0;
    for (Py_ssize_t j = 0; j < count; j += 2) {
        memcpy(out, s + copied, (size_t)(spans[j] - copied));
        out += spans[j] - copied;
        memcpy(out, lit, (size_t)lit_len);
        out += lit_len;
        copied = spans[j + 1];
    }
    memcpy(out, s + copied, (size_t)(n - copied));
    goto done;
none:
    Py_INCREF(Py_None);
    result = Py_None;
done:
    if (spans != stack)
        PyMem_Free(spans);
    return result;
}

static PyMethodDef methods[] = {
    {"shape", (PyCFunction)(void (*)(void))shape, METH_FASTCALL,
     "shape(sql, literal, other): ``simple_shape`` of ``sql``: its bare numbers replaced by ``literal``, or None; "
     "``other(sql, literal)`` when either is not ASCII."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_shape", "A query's shape in C.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__shape(void)
{
    fill_classes();
    return PyModule_Create(&module);
}
