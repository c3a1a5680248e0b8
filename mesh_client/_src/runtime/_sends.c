/* A socket write that says how much went out even when a Ctrl-C cuts it short.

   Python runs a SIGINT handler between two bytecodes: right after socket.sendmsg() returns, the
   KeyboardInterrupt is raised in place of its result, so a caller cannot know whether its frame
   went out whole, in part, or not at all, and must break the connection (the peer would read the
   next frame as the rest of this one). Here the count is stored in the caller's box before the
   function returns, so the caller reads it back in its handler: a frame that went out whole is
   no reason to break anything, and one that went out in part can be finished by another thread.

   send(fd, pieces, box[, flags]): pieces a list of bytes (NotImplemented for anything else: the
   caller uses socket.sendmsg); box a list whose item 0 holds what of the frame went out before
   this call (the caller sets 0 for a new frame), to which the call adds its count, so a caller
   that writes a frame in several calls (a non-blocking flush) reads its running total. flags
   go to sendmsg (MSG_DONTWAIT: never block; nothing taken raises BlockingIOError). A blocking
   socket whose send timeout passed with nothing taken raises BlockingIOError, as
   socket.sendmsg does; a signal that interrupted the call before anything was sent runs its
   handler (the box unchanged) and the call is made again if the handler returned.

   Built against the limited API (abi3), so one build serves every CPython from 3.10 on. */

#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define MAX_PIECES 64

static int store(PyObject *box, Py_ssize_t count) {
    PyObject *value = PyLong_FromSsize_t(count);
    if (value == NULL) {
        return -1;
    }
    return PyList_SetItem(box, 0, value); /* steals the reference */
}

static PyObject *sends_send(PyObject *module, PyObject *args) {
    int fd;
    int flags = 0;
    PyObject *pieces, *box;
    (void)module;
    if (!PyArg_ParseTuple(args, "iO!O!|i", &fd, &PyList_Type, &pieces, &PyList_Type, &box, &flags)) {
        return NULL;
    }
    if (PyList_Size(box) < 1) {
        PyErr_SetString(PyExc_ValueError, "the box needs one item");
        return NULL;
    }
    Py_ssize_t n = PyList_Size(pieces);
    if (n < 1 || n > MAX_PIECES) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    struct iovec iov[MAX_PIECES];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *piece = PyList_GetItem(pieces, i); /* borrowed: the list holds it */
        if (piece == NULL || !PyBytes_Check(piece)) {
            Py_RETURN_NOTIMPLEMENTED;
        }
        char *data;
        Py_ssize_t size;
        if (PyBytes_AsStringAndSize(piece, &data, &size) < 0) {
            return NULL;
        }
        iov[i].iov_base = data;
        iov[i].iov_len = (size_t)size;
    }
    Py_ssize_t before = PyLong_AsSsize_t(PyList_GetItem(box, 0)); /* borrowed */
    if (before < 0) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        PyErr_SetString(PyExc_ValueError, "box[0] must hold what went out before this call (0 for a new frame)");
        return NULL;
    }
    /* The bytes stay alive and unchanged while the GIL is released: the caller's list holds
       them, and bytes do not change. */
    Py_INCREF(pieces);
    struct msghdr msg = {0};
    msg.msg_iov = iov;
    msg.msg_iovlen = (size_t)n;
    ssize_t sent;
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        sent = sendmsg(fd, &msg, flags);
        Py_END_ALLOW_THREADS
        if (sent >= 0) {
            break;
        }
        if (errno == EINTR) {
            if (PyErr_CheckSignals() < 0) {
                Py_DECREF(pieces);
                return NULL;
            }
            continue;
        }
        Py_DECREF(pieces);
        return PyErr_SetFromErrno(PyExc_OSError); /* EAGAIN: BlockingIOError */
    }
    Py_DECREF(pieces);
    if (store(box, before + (Py_ssize_t)sent) < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t((Py_ssize_t)sent);
}

static PyMethodDef sends_methods[] = {
    {"send", sends_send, METH_VARARGS,
     "send(fd, pieces, box[, flags]) -> bytes sent, also added to box[0] before returning; "
     "NotImplemented unless pieces is a list of 1 to 64 bytes objects."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef sends_module = {
    PyModuleDef_HEAD_INIT, "_sends", "A socket write whose count survives a Ctrl-C.", -1, sends_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__sends(void) {
    return PyModule_Create(&sends_module);
}
