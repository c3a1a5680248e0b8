/* The per-message Python of the wire, in C: taking the small MESSAGE frames of a read, decoding a
   request's envelope, packing a request's or reply's frame.

   Each function here is a faster twin of a Python one that stays (protocol._take_py,
   envelopes._request_parts_py, packing._request_frame_py and _reply_frame_py) for installs
   without a C compiler, and for every case not handled here: this code handles the common
   shapes only and hands anything else to the Python twin, which gives the same result or raises
   the same error. So the bytes on the wire, the limits and the errors are the Python code's;
   tests/unit/wire runs its tests on both.

   Nothing is unpickled here: take() copies out segments (the caller calls it only once the
   connection is authenticated), request_parts() looks the fields up in the decoded ones kept by
   envelopes.py and hands a miss to Python, which unpickles (plain values only).

   Built against the full API (a buffer of any object, fast tuples and lists), for the Python it
   is installed for. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#define HEADER 8 /* magic (2), version (1), kind (1), segment count (2), field (2) */
#define MESSAGE 5
#define VERSION 1
#define SMALL (64 * 1024) /* frames.FLAGGED_FROM: a bytes segment under it is its own length */
#define REQUEST_FIXED 10 /* call id (u64), op (u16) */
#define REPLY_FIXED 9    /* call id (u64), status (u8) */

static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = (v << 8) | p[i];
    }
    return v;
}

static unsigned char *put64(unsigned char *p, uint64_t v) {
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
    return p + 8;
}

static unsigned char *put_head(unsigned char *p, unsigned count) {
    p[0] = 'P';
    p[1] = 'M';
    p[2] = VERSION;
    p[3] = MESSAGE;
    p[4] = (unsigned char)(count >> 8);
    p[5] = (unsigned char)count;
    p[6] = 0;
    p[7] = 0;
    return p + HEADER;
}

/* take(buf, pos, limit, max_segments) -> (messages, pos): protocol._take_py. */
static PyObject *frames_take(PyObject *module, PyObject *args) {
    PyObject *buf;
    Py_ssize_t pos, limit, max_segments;
    (void)module;
    if (!PyArg_ParseTuple(args, "Onnn", &buf, &pos, &limit, &max_segments)) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len;
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        goto fail;
    }
    while (pos >= 0 && end - pos >= HEADER) {
        const unsigned char *h = data + pos;
        Py_ssize_t count = (h[4] << 8) | h[5];
        if (h[0] != 'P' || h[1] != 'M' || h[2] != VERSION || h[3] != MESSAGE || count > max_segments) {
            break;
        }
        Py_ssize_t at = pos + HEADER + 8 * count;
        if (at > end) {
            break;
        }
        Py_ssize_t total = 0;
        int over = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            uint64_t n = get64(h + HEADER + 8 * i);
            if (n > (uint64_t)limit || (total += (Py_ssize_t)n) > limit) { /* flagged ones too */
                over = 1;
                break;
            }
        }
        if (over || at + total > end) {
            break;
        }
        PyObject *segments = PyList_New(count);
        if (segments == NULL) {
            goto fail;
        }
        for (Py_ssize_t i = 0; i < count; i++) {
            Py_ssize_t n = (Py_ssize_t)get64(h + HEADER + 8 * i);
            PyObject *segment = PyBytes_FromStringAndSize((const char *)data + at, n);
            if (segment == NULL) {
                Py_DECREF(segments);
                goto fail;
            }
            PyList_SET_ITEM(segments, i, segment);
            at += n;
        }
        int appended = PyList_Append(out, segments);
        Py_DECREF(segments);
        if (appended < 0) {
            goto fail;
        }
        pos = at;
    }
    PyBuffer_Release(&view);
    PyObject *result = Py_BuildValue("(Nn)", out, pos);
    return result;
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* What envelopes.py binds once: its kept fields (a dict: pickle -> tuple) and its Python twin;
   and packing.py: the Python twins of the frames. */
static PyObject *fields_seen = NULL;
static PyObject *parts_slow = NULL;
static PyObject *request_slow = NULL;
static PyObject *reply_slow = NULL;

static PyObject *frames_bind_requests(PyObject *module, PyObject *args) {
    PyObject *seen, *slow;
    (void)module;
    if (!PyArg_ParseTuple(args, "O!O", &PyDict_Type, &seen, &slow)) {
        return NULL;
    }
    Py_INCREF(seen);
    Py_INCREF(slow);
    Py_XSETREF(fields_seen, seen);
    Py_XSETREF(parts_slow, slow);
    Py_RETURN_NONE;
}

static PyObject *frames_bind_frames(PyObject *module, PyObject *args) {
    PyObject *request, *reply;
    (void)module;
    if (!PyArg_ParseTuple(args, "OO", &request, &reply)) {
        return NULL;
    }
    Py_INCREF(request);
    Py_INCREF(reply);
    Py_XSETREF(request_slow, request);
    Py_XSETREF(reply_slow, reply);
    Py_RETURN_NONE;
}

/* request_parts(segments) -> (call_id, op, header, payload): envelopes._request_parts_py, for a
   request whose fields were decoded lately; anything else goes to it. */
static PyObject *frames_request_parts(PyObject *module, PyObject *segments) {
    (void)module;
    if (parts_slow == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_frames.bind_requests() was not called");
        return NULL;
    }
    if (!PyList_CheckExact(segments) || PyList_GET_SIZE(segments) < 1) {
        return PyObject_CallOneArg(parts_slow, segments);
    }
    PyObject *envelope = PyList_GET_ITEM(segments, 0);
    if (!PyBytes_CheckExact(envelope) || PyBytes_GET_SIZE(envelope) < REQUEST_FIXED) {
        return PyObject_CallOneArg(parts_slow, segments);
    }
    const unsigned char *e = (const unsigned char *)PyBytes_AS_STRING(envelope);
    PyObject *raw = PyBytes_FromStringAndSize((const char *)e + REQUEST_FIXED, PyBytes_GET_SIZE(envelope) - REQUEST_FIXED);
    if (raw == NULL) {
        return NULL;
    }
    PyObject *fields = PyDict_GetItemWithError(fields_seen, raw); /* borrowed */
    Py_DECREF(raw);
    if (fields == NULL || !PyTuple_CheckExact(fields)) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        return PyObject_CallOneArg(parts_slow, segments);
    }
    Py_INCREF(fields); /* the dict may drop it while we build (a GC run can clear the dict) */
    PyObject *call_id = PyLong_FromUnsignedLongLong(get64(e));
    PyObject *op = PyLong_FromLong((e[8] << 8) | e[9]);
    Py_ssize_t n = PyTuple_GET_SIZE(fields);
    PyObject *header = PyTuple_New(2 + n);
    PyObject *payload = PyList_GetSlice(segments, 1, PyList_GET_SIZE(segments));
    PyObject *result = NULL;
    if (call_id != NULL && op != NULL && header != NULL && payload != NULL) {
        Py_INCREF(call_id);
        PyTuple_SET_ITEM(header, 0, call_id);
        Py_INCREF(op);
        PyTuple_SET_ITEM(header, 1, op);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PyTuple_GET_ITEM(fields, i);
            Py_INCREF(item);
            PyTuple_SET_ITEM(header, 2 + i, item);
        }
        result = PyTuple_Pack(4, call_id, op, header, payload);
    }
    Py_DECREF(fields);
    Py_XDECREF(call_id);
    Py_XDECREF(op);
    Py_XDECREF(header);
    Py_XDECREF(payload);
    return result;
}

/* The value of a small unsigned field, or -1 (no error set) where it is not an int that fits:
   the Python twin then raises what struct.pack raises. */
static long long small_field(PyObject *value, unsigned long long most) {
    if (!PyLong_CheckExact(value)) {
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return v > most ? -1 : (long long)v;
}

static int call_id_of(PyObject *value, uint64_t *id) {
    if (!PyLong_CheckExact(value)) {
        return 0;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *id = (uint64_t)v;
    return 1;
}

/* The one small bytes segment of a payload, or NULL (its other shapes go to Python). */
static PyObject *one_small(PyObject *payload) {
    if (!PyList_CheckExact(payload) || PyList_GET_SIZE(payload) != 1) {
        return NULL;
    }
    PyObject *p = PyList_GET_ITEM(payload, 0);
    return PyBytes_CheckExact(p) && PyBytes_GET_SIZE(p) < SMALL ? p : NULL;
}

/* request_frame(call_id, op, fields, payload) -> pieces: packing._request_frame_py for a
   payload of one small bytes segment; the Python twin for anything else. */
static PyObject *frames_request_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4 || request_slow == NULL) {
        PyErr_SetString(PyExc_TypeError, "request_frame(call_id, op, fields, payload), after bind_frames()");
        return NULL;
    }
    uint64_t id;
    long long op = small_field(args[1], 0xffff);
    PyObject *p = one_small(args[3]);
    if (p == NULL || op < 0 || !PyBytes_CheckExact(args[2]) || !call_id_of(args[0], &id)) {
        return PyObject_Vectorcall(request_slow, args, 4, NULL);
    }
    unsigned char head[HEADER + 8 + 8 + REQUEST_FIXED];
    unsigned char *w = put_head(head, 2);
    w = put64(w, (uint64_t)(REQUEST_FIXED + PyBytes_GET_SIZE(args[2])));
    w = put64(w, (uint64_t)PyBytes_GET_SIZE(p));
    w = put64(w, id);
    w[0] = (unsigned char)(op >> 8);
    w[1] = (unsigned char)op;
    PyObject *packed = PyBytes_FromStringAndSize((const char *)head, sizeof head);
    if (packed == NULL) {
        return NULL;
    }
    PyObject *pieces = PyList_New(3);
    if (pieces == NULL) {
        Py_DECREF(packed);
        return NULL;
    }
    PyList_SET_ITEM(pieces, 0, packed);
    Py_INCREF(args[2]);
    PyList_SET_ITEM(pieces, 1, args[2]);
    Py_INCREF(p);
    PyList_SET_ITEM(pieces, 2, p);
    return pieces;
}

/* reply_frame(call_id, status, payload) -> pieces: packing._reply_frame_py for a payload of
   one small bytes segment or none; the Python twin for anything else. */
static PyObject *frames_reply_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3 || reply_slow == NULL) {
        PyErr_SetString(PyExc_TypeError, "reply_frame(call_id, status, payload), after bind_frames()");
        return NULL;
    }
    uint64_t id;
    long long status = small_field(args[1], 0xff);
    PyObject *payload = args[2];
    int none = PyList_CheckExact(payload) && PyList_GET_SIZE(payload) == 0;
    PyObject *p = none ? NULL : one_small(payload);
    if ((p == NULL && !none) || status < 0 || !call_id_of(args[0], &id)) {
        return PyObject_Vectorcall(reply_slow, args, 3, NULL);
    }
    unsigned char head[HEADER + 8 + 8 + REPLY_FIXED];
    unsigned char *w = put_head(head, none ? 1 : 2);
    w = put64(w, REPLY_FIXED);
    if (!none) {
        w = put64(w, (uint64_t)PyBytes_GET_SIZE(p));
    }
    w = put64(w, id);
    *w++ = (unsigned char)status;
    PyObject *packed = PyBytes_FromStringAndSize((const char *)head, w - head);
    if (packed == NULL) {
        return NULL;
    }
    PyObject *pieces = PyList_New(none ? 1 : 2);
    if (pieces == NULL) {
        Py_DECREF(packed);
        return NULL;
    }
    PyList_SET_ITEM(pieces, 0, packed);
    if (!none) {
        Py_INCREF(p);
        PyList_SET_ITEM(pieces, 1, p);
    }
    return pieces;
}

static PyMethodDef frames_methods[] = {
    {"take", frames_take, METH_VARARGS,
     "take(buf, pos, limit, max_segments) -> (messages, pos): the complete small MESSAGE frames "
     "of buf from pos (protocol._take_py)."},
    {"bind_requests", frames_bind_requests, METH_VARARGS,
     "bind_requests(fields_seen, slow): the kept fields and the Python twin of request_parts."},
    {"bind_frames", frames_bind_frames, METH_VARARGS,
     "bind_frames(request_slow, reply_slow): the Python twins of request_frame and reply_frame."},
    {"request_parts", frames_request_parts, METH_O,
     "request_parts(segments) -> (call_id, op, header, payload) (envelopes._request_parts_py)."},
    {"request_frame", (PyCFunction)(void (*)(void))frames_request_frame, METH_FASTCALL,
     "request_frame(call_id, op, fields, payload) -> pieces (packing._request_frame_py)."},
    {"reply_frame", (PyCFunction)(void (*)(void))frames_reply_frame, METH_FASTCALL,
     "reply_frame(call_id, status, payload) -> pieces (packing._reply_frame_py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef frames_module = {
    PyModuleDef_HEAD_INIT, "_frames", "The wire's per-message work in C (see _frames.c).", -1, frames_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__frames(void) {
    return PyModule_Create(&frames_module);
}
