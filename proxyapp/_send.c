/* One step of a coroutine without StopIteration, and the wait a wire resumes, for ``proxyapp.driver``.
 *
 * ``send``: the driver steps a session's command coroutine once per packet it waits for, and a coroutine that returns
 * from ``coro.send(None)`` raises StopIteration, which costs more than the step (the exception, its traceback entry,
 * its deallocation). ``PyIter_Send`` tells a return apart from a yield without raising anything.
 *
 * ``DirectWait``: what a coroutine run by a driver awaits for a wire's bytes, when the wire itself resumes the driver
 * (``Wire.fill``, ``Wire.wake``). An asyncio future does more than this needs (a loop, callbacks, a result, an
 * iterator object of its own) and is made anew for every wait. A wire keeps one DirectWait: awaiting it yields it
 * once to the driver, which knows it as the wait the wire resumes; the next step ends the await with None. It has no
 * ``throw``: a cancellation thrown into the coroutine is raised where it awaits.
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

typedef struct {
    PyObject_HEAD
    int yielded; /* this await yielded to the driver already: the next step ends it */
} DirectWait;

static PyObject *direct_wait_await(PyObject *self)
{
    ((DirectWait *)self)->yielded = 0;
    Py_INCREF(self);
    return self;
}

static PyObject *direct_wait_next(PyObject *self)
{
    DirectWait *wait = (DirectWait *)self;
    if (wait->yielded) {
        wait->yielded = 0;
        return NULL; /* the await ends with None: no StopIteration is made */
    }
    wait->yielded = 1;
    Py_INCREF(self);
    return self;
}

static PyAsyncMethods direct_wait_async = {
    .am_await = direct_wait_await,
};

static PyTypeObject DirectWaitType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "proxyapp._send.DirectWait",
    .tp_doc = "What a coroutine run by a driver awaits for a wire's bytes; the wire resumes the driver itself.",
    .tp_basicsize = sizeof(DirectWait),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_as_async = &direct_wait_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = direct_wait_next,
};

static PyMethodDef methods[] = {
    {"send", (PyCFunction)(void (*)(void))send, METH_FASTCALL,
     "send(coro, finished): what ``coro.send(None)`` yields, or ``finished`` when the coroutine returned."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_send", "One step of a coroutine without StopIteration, and the wait a wire resumes.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__send(void)
{
    if (PyType_Ready(&DirectWaitType) < 0)
        return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (mod == NULL)
        return NULL;
    Py_INCREF(&DirectWaitType);
    if (PyModule_AddObject(mod, "DirectWait", (PyObject *)&DirectWaitType) < 0) {
        Py_DECREF(&DirectWaitType);
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
