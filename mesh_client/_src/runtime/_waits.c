/* Waits that spin briefly before they sleep, with the GIL released.

   A call crosses four waits (the proc's I/O thread, the actor's thread, the caller's I/O thread,
   the caller's thread); each woken from sleep pays the kernel's wake-up of an idle core, which on
   a many-core host costs as much as the socket hop itself. A wait that polls its condition for a
   bounded time first is woken by a store instead. Python cannot spin without holding the GIL
   (which would stall the thread it waits for), so the spin lives here.

   Spinning only pays where the wait is short; where it is not (a proc that a fan-out reaches
   every few hundred microseconds, a controller between training steps) it only takes cores
   from the threads being waited for. So each waiter keeps its pace, a moving average of how long
   its recent waits took (each counted at most 4 x spin_ns), and spins only while that average is
   under spin_ns.

   Bell: an auto-reset event. ring() makes one wait() return (at once if none is waiting);
   rings that arrive while nobody waits merge into one. wait() may return for a ring meant for an
   earlier round, so callers re-check their own condition in a loop.

   poll(): epoll_wait that first rings the given bells, after releasing the GIL (so a woken
   thread finds the GIL free instead of sleeping on it again), then polls without sleeping for at
   most spin_ns, then sleeps for the rest of the timeout.

   Built against the limited API (abi3), so one build serves every CPython from 3.10 on. */

#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 256
#define SPIN_PAUSES 16 /* pauses between two looks at the clock and two yields (a power of 2) */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* 2: Bell.wait's paced argument. */
#define WAITS_API 2

/* ---- Pace: how long a waiter's recent waits took ------------------------------------------ */

typedef struct {
    _Atomic int64_t avg_ns; /* moved a quarter of the way to each new wait's length */
} pace_t;

static inline int64_t pace_spin(pace_t *pace, int64_t spin_ns) {
    return spin_ns > 0 && atomic_load_explicit(&pace->avg_ns, memory_order_relaxed) < spin_ns
               ? spin_ns
               : 0;
}

static inline void pace_record(pace_t *pace, int64_t waited_ns, int64_t spin_ns) {
    if (spin_ns <= 0) {
        return;
    }
    if (waited_ns > 4 * spin_ns) {
        waited_ns = 4 * spin_ns; /* one long idle spell must not stop spinning for long */
    }
    int64_t avg = atomic_load_explicit(&pace->avg_ns, memory_order_relaxed);
    atomic_store_explicit(&pace->avg_ns, avg + (waited_ns - avg) / 4, memory_order_relaxed);
}

typedef struct {
    PyObject_HEAD
    pace_t pace;
} Pace;

static PyObject *PaceType = NULL;

/* ---- Bell ------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    atomic_uint pending; /* 1: rung since the last wait consumed it */
    atomic_uint parked;  /* a waiter is (about to be) asleep on the futex */
    pace_t pace;
} Bell;

static void bell_ring_nogil(Bell *bell) {
    /* Dekker pairing with wait: store pending, then read parked; the waiter stores parked,
       then reads pending. Sequentially consistent, so one of the two sees the other. */
    atomic_store(&bell->pending, 1);
    if (atomic_load(&bell->parked)) {
        syscall(SYS_futex, &bell->pending, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    }
}

#define WAIT_TIMED_OUT 0
#define WAIT_RUNG 1
#define WAIT_INTERRUPTED 2 /* a signal's handler ran: the caller lets Python's handlers run (a
                              Ctrl-C must not wait for the ring) */

/* Take a ring, spinning up to spin_ns for one: WAIT_RUNG, or WAIT_TIMED_OUT once the spin (or
   the deadline, deadline_ns < 0: none) is over. */
static int bell_spin_nogil(Bell *bell, int64_t deadline_ns, int64_t spin_ns) {
    if (atomic_exchange(&bell->pending, 0)) {
        return WAIT_RUNG;
    }
    if (spin_ns <= 0) {
        return WAIT_TIMED_OUT;
    }
    int64_t spin_until = now_ns() + spin_ns;
    if (deadline_ns >= 0 && deadline_ns < spin_until) {
        spin_until = deadline_ns;
    }
    unsigned int round = 0;
    for (;;) {
        if (atomic_load_explicit(&bell->pending, memory_order_relaxed) &&
            atomic_exchange(&bell->pending, 0)) {
            return WAIT_RUNG;
        }
        cpu_relax();
        if ((++round & (SPIN_PAUSES - 1)) == 0) {
            /* Give the core to a runnable thread, if one waits for it: with more spinners than
               cores, the thread a spinner waits for may be queued behind it. */
            sched_yield();
            if (now_ns() >= spin_until) {
                return WAIT_TIMED_OUT;
            }
        }
    }
}

/* Sleep until rung: WAIT_RUNG, WAIT_TIMED_OUT (deadline_ns < 0: none), or WAIT_INTERRUPTED. */
static int bell_sleep_nogil(Bell *bell, int64_t deadline_ns) {
    for (;;) {
        atomic_store(&bell->parked, 1);
        if (atomic_exchange(&bell->pending, 0)) {
            atomic_store(&bell->parked, 0);
            return WAIT_RUNG;
        }
        struct timespec rel;
        struct timespec *relp = NULL;
        if (deadline_ns >= 0) {
            int64_t left = deadline_ns - now_ns();
            if (left <= 0) {
                atomic_store(&bell->parked, 0);
                return atomic_exchange(&bell->pending, 0) ? WAIT_RUNG : WAIT_TIMED_OUT;
            }
            rel.tv_sec = (time_t)(left / 1000000000);
            rel.tv_nsec = (long)(left % 1000000000);
            relp = &rel;
        }
        /* Sleeps only while pending is still 0 (the kernel checks it atomically). */
        long slept = syscall(SYS_futex, &bell->pending, FUTEX_WAIT_PRIVATE, 0, relp, NULL, 0);
        int interrupted = slept < 0 && errno == EINTR;
        atomic_store(&bell->parked, 0);
        if (atomic_exchange(&bell->pending, 0)) {
            return WAIT_RUNG;
        }
        if (interrupted) {
            return WAIT_INTERRUPTED;
        }
    }
}

/* tp_new of both types: no arguments, and PyType_GenericAlloc's zeroed memory is the start
   state (an unrung bell with no waiter, a pace with no history). */
static PyObject *new_without_arguments(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (PyTuple_Size(args) != 0 || (kwds != NULL && PyDict_Size(kwds) != 0)) {
        PyObject *name = PyObject_GetAttrString((PyObject *)type, "__name__");
        if (name != NULL) {
            PyErr_Format(PyExc_TypeError, "%S() takes no arguments", name);
            Py_DECREF(name);
        }
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    return alloc(type, 0);
}

static void plain_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
    tp_free(self);
    Py_DECREF(type);
}

static PyObject *Bell_ring(PyObject *self, PyObject *unused) {
    (void)unused;
    bell_ring_nogil((Bell *)self);
    Py_RETURN_NONE;
}

/* Seconds (None or negative: no limit) to an absolute deadline in ns, or -1 for none. */
static int deadline_from(PyObject *timeout, int64_t *deadline_ns) {
    if (timeout == Py_None) {
        *deadline_ns = -1;
        return 0;
    }
    double seconds = PyFloat_AsDouble(timeout);
    if (seconds == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    if (seconds != seconds) {
        PyErr_SetString(PyExc_ValueError, "timeout must be a number of seconds, not NaN");
        return -1;
    }
    if (seconds < 0) {
        *deadline_ns = -1;
        return 0;
    }
    if (seconds > 1e9) {
        seconds = 1e9;
    }
    *deadline_ns = now_ns() + (int64_t)(seconds * 1e9);
    return 0;
}

static PyObject *Bell_wait(PyObject *self, PyObject *args) {
    PyObject *timeout = Py_None;
    long long spin_ns = 0;
    int paced = 1;
    if (!PyArg_ParseTuple(args, "|OLp:wait", &timeout, &spin_ns, &paced)) {
        return NULL;
    }
    int64_t deadline_ns;
    if (deadline_from(timeout, &deadline_ns) < 0) {
        return NULL;
    }
    Bell *bell = (Bell *)self;
    int64_t spin = paced ? pace_spin(&bell->pace, (int64_t)spin_ns) : (int64_t)spin_ns;
    int64_t started = now_ns();
    int outcome;
    Py_BEGIN_ALLOW_THREADS
    outcome = bell_spin_nogil(bell, deadline_ns, spin);
    Py_END_ALLOW_THREADS
    /* A signal that came during the spin interrupts no sleep: its handlers run here, before it.
       (The GIL is taken back only where the spin ran out, the slow path anyway.) */
    if (outcome != WAIT_RUNG && spin > 0 && PyErr_CheckSignals() < 0) {
        return NULL;
    }
    if (outcome != WAIT_RUNG) {
        Py_BEGIN_ALLOW_THREADS
        outcome = bell_sleep_nogil(bell, deadline_ns);
        Py_END_ALLOW_THREADS
    }
    if (paced) {
        pace_record(&bell->pace, now_ns() - started, (int64_t)spin_ns);
    }
    if (outcome == WAIT_INTERRUPTED) {
        /* As an interrupted lock acquire: run the handlers (a KeyboardInterrupt raises here, in
           the waiting thread). If they return, report a wake-up: the caller checks its condition
           and waits again, and a handler that itself waited on this thread's bell may have taken
           the ring this wait was for. */
        if (PyErr_CheckSignals() < 0) {
            return NULL;
        }
        outcome = WAIT_RUNG;
    }
    return PyBool_FromLong(outcome == WAIT_RUNG);
}

static PyMethodDef Bell_methods[] = {
    {"ring", Bell_ring, METH_NOARGS, "Make one wait() return; a no-op if already rung."},
    {"wait", Bell_wait, METH_VARARGS,
     "wait(timeout=None, spin_ns=0, paced=True) -> bool: True once rung (consuming the ring), "
     "False if timeout seconds passed first. Spins up to spin_ns before sleeping, while this "
     "bell's recent waits were short (see Pace) where paced, else whatever they were (and the "
     "wait is left out of them); the GIL is released."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Bell_slots[] = {
    {Py_tp_new, new_without_arguments},
    {Py_tp_dealloc, plain_dealloc},
    {Py_tp_methods, Bell_methods},
    {Py_tp_doc, "An auto-reset event whose wait spins briefly before it sleeps."},
    {0, NULL},
};

static PyType_Spec Bell_spec = {
    "mesh_client._src.runtime._waits.Bell",
    sizeof(Bell),
    0,
    Py_TPFLAGS_DEFAULT,
    Bell_slots,
};

static PyObject *BellType = NULL;

/* ---- Pace, the Python type: a poller's (the reactor's) history of waits ---------------- */

static PyObject *Pace_average_ns(PyObject *self, PyObject *unused) {
    (void)unused;
    return PyLong_FromLongLong(atomic_load(&((Pace *)self)->pace.avg_ns));
}

static PyMethodDef Pace_methods[] = {
    {"average_ns", Pace_average_ns, METH_NOARGS,
     "The moving average of the recent waits, in ns (each counted at most 4 x spin_ns)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Pace_slots[] = {
    {Py_tp_new, new_without_arguments},
    {Py_tp_dealloc, plain_dealloc},
    {Py_tp_methods, Pace_methods},
    {Py_tp_doc, "How long a poller's recent waits took: it spins only while they were short."},
    {0, NULL},
};

static PyType_Spec Pace_spec = {
    "mesh_client._src.runtime._waits.Pace",
    sizeof(Pace),
    0,
    Py_TPFLAGS_DEFAULT,
    Pace_slots,
};

/* ---- poll ------------------------------------------------------------------------------- */

static PyObject *waits_poll(PyObject *module, PyObject *args) {
    (void)module;
    int epfd;
    PyObject *timeout = Py_None;
    long long spin_ns = 0;
    PyObject *rings = Py_None;
    PyObject *pace_obj = Py_None;
    if (!PyArg_ParseTuple(args, "i|OLOO:poll", &epfd, &timeout, &spin_ns, &rings, &pace_obj)) {
        return NULL;
    }
    pace_t *pace = NULL;
    if (pace_obj != Py_None) {
        if (!PyObject_TypeCheck(pace_obj, (PyTypeObject *)PaceType)) {
            PyErr_SetString(PyExc_TypeError, "poll(): pace must be a Pace or None");
            return NULL;
        }
        pace = &((Pace *)pace_obj)->pace;
    }
    int64_t deadline_ns;
    if (deadline_from(timeout, &deadline_ns) < 0) {
        return NULL;
    }
    int immediate = timeout != Py_None && deadline_ns >= 0 && PyFloat_AsDouble(timeout) == 0.0;

    /* The bells to ring once the GIL is released: the list keeps them alive meanwhile. */
    Bell *stack_bells[64];
    Bell **bells = stack_bells;
    Py_ssize_t n_bells = 0;
    if (rings != Py_None) {
        if (!PyList_Check(rings)) {
            PyErr_SetString(PyExc_TypeError, "poll(): rings must be a list of Bell or None");
            return NULL;
        }
        n_bells = PyList_Size(rings);
        if (n_bells > 64) {
            bells = PyMem_Malloc(sizeof(Bell *) * (size_t)n_bells);
            if (bells == NULL) {
                return PyErr_NoMemory();
            }
        }
        for (Py_ssize_t i = 0; i < n_bells; i++) {
            PyObject *item = PyList_GetItem(rings, i);
            if (item == NULL || !PyObject_TypeCheck(item, (PyTypeObject *)BellType)) {
                if (bells != stack_bells) {
                    PyMem_Free(bells);
                }
                PyErr_SetString(PyExc_TypeError, "poll(): rings must hold Bell objects only");
                return NULL;
            }
            bells[i] = (Bell *)item;
        }
        Py_INCREF(rings);
    }

    struct epoll_event events[MAX_EVENTS];
    int n = 0;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n_bells; i++) {
        bell_ring_nogil(bells[i]);
    }
    int64_t started = now_ns();
    int64_t spin = pace == NULL ? (int64_t)spin_ns : pace_spin(pace, (int64_t)spin_ns);
    /* A look without sleeping first only where it is all there is, or a spin follows. */
    n = immediate || spin > 0 ? epoll_wait(epfd, events, MAX_EVENTS, 0) : 0;
    if (n == 0 && !immediate && spin > 0) {
        int64_t spin_until = now_ns() + spin;
        if (deadline_ns >= 0 && deadline_ns < spin_until) {
            spin_until = deadline_ns;
        }
        while (n == 0 && now_ns() < spin_until) {
            sched_yield(); /* as in a bell's spin: a runnable thread may need this core */
            n = epoll_wait(epfd, events, MAX_EVENTS, 0);
        }
    }
    if (n == 0 && !immediate) {
        int ms = -1;
        if (deadline_ns >= 0) {
            int64_t left = deadline_ns - now_ns();
            /* Rounded up, as Python's epoll.poll does: never wake before the deadline. */
            int64_t rounded = (left + 999999) / 1000000;
            ms = left <= 0 ? 0 : rounded > INT_MAX ? INT_MAX : (int)rounded;
        }
        n = epoll_wait(epfd, events, MAX_EVENTS, ms);
    }
    if (pace != NULL && !immediate) {
        pace_record(pace, now_ns() - started, (int64_t)spin_ns);
    }
    if (n < 0) {
        err = errno;
    }
    Py_END_ALLOW_THREADS
    if (rings != Py_None) {
        Py_DECREF(rings);
    }
    if (bells != stack_bells) {
        PyMem_Free(bells);
    }
    if (n < 0) {
        if (err == EINTR) {
            return PyList_New(0);  /* as an empty poll: the reactor loops */
        }
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *ready = PyList_New(n);
    if (ready == NULL) {
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        PyObject *pair = Py_BuildValue("(iI)", events[i].data.fd, (unsigned int)events[i].events);
        if (pair == NULL) {
            Py_DECREF(ready);
            return NULL;
        }
        PyList_SetItem(ready, i, pair);
    }
    return ready;
}

static PyMethodDef waits_methods[] = {
    {"poll", waits_poll, METH_VARARGS,
     "poll(epfd, timeout=None, spin_ns=0, rings=None, pace=None) -> [(fd, events)]: ring the "
     "bells, then epoll_wait on epfd (registered with data.fd = fd), spinning up to spin_ns "
     "(while pace's recent waits were short, where a Pace is given) before "
     "sleeping; the GIL is released throughout."},
    {NULL, NULL, 0, NULL},
};

static int waits_exec(PyObject *module) {
    BellType = PyType_FromSpec(&Bell_spec);
    if (BellType == NULL) {
        return -1;
    }
    Py_INCREF(BellType);
    if (PyModule_AddObject(module, "Bell", BellType) < 0) {
        Py_DECREF(BellType);
        return -1;
    }
    PaceType = PyType_FromSpec(&Pace_spec);
    if (PaceType == NULL) {
        return -1;
    }
    Py_INCREF(PaceType);
    if (PyModule_AddObject(module, "Pace", PaceType) < 0) {
        Py_DECREF(PaceType);
        return -1;
    }
    /* What natives.py expects: a build from older sources (a checkout pulled, not reinstalled)
       is left unused rather than called with arguments it does not take. */
    return PyModule_AddIntConstant(module, "API", WAITS_API);
}

static PyModuleDef_Slot waits_slots[] = {
    {Py_mod_exec, waits_exec},
    {0, NULL},
};

static struct PyModuleDef waits_module = {
    PyModuleDef_HEAD_INIT,
    "_waits",
    "Spin-then-sleep waits with the GIL released (see waits.py).",
    0,
    waits_methods,
    waits_slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__waits(void) { return PyModuleDef_Init(&waits_module); }
