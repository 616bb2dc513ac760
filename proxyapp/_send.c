/* One step of a coroutine without StopIteration: ``proxyapp.driver`` steps a session's command coroutine once per
 * packet it waits for, and a coroutine that returns from ``coro.send(None)`` raises StopIteration, which costs more
 * than the step (the exception, its traceback entry, its deallocation). ``PyIter_Send`` tells a return apart from a
 * yield without raising anything.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *send(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "send(coro, finished) takes 2 arguments");
        return NULL;
    }
    PyObject *result = NULL;
    switch (PyIter_Send(args[0], Py_None, &result)) {
    case PYGEN_NEXT:
        return result;
    case PYGEN_RETURN:
        Py_DECREF(result);
        Py_INCREF(args[1]);
        return args[1];
    default:
        return NULL;
    }
}

static PyMethodDef methods[] = {
    {"send", (PyCFunction)(void (*)(void))send, METH_FASTCALL,
     "send(coro, finished): what ``coro.send(None)`` yields, or ``finished`` when the coroutine returned."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_send", "One step of a coroutine without StopIteration.", -1, methods, NULL, NULL, NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__send(void)
{
    return PyModule_Create(&module);
}
