/* The agents' per-datagram work in C: batched socket IO and the transport header.
 *
 * Why C: profiled on bench/agent.py, what an agent spent per packet outside the protocol's
 * decisions was Python moving bytes: filling sendmmsg's structures one memoryview write at a
 * time, turning recvmmsg's buffers into bytes and traffic classes, packing a header and
 * concatenating the payload behind it, unpacking a header into a tuple. Each of these is a few
 * lines of C and a fraction of the Python's cost. The protocol (qp.py, mrc.py, rocev2.py...)
 * stays Python and sans-IO; hostagent/runtime/batchio.py and hostagent/protocol/wire.py are the only callers.
 *
 * Built by `make ext` (scripts/install.sh runs it) with _crc32.c: gcc, the Python headers, zlib.
 *
 * Receiver(batch, size): dispatch(fd, receivers, now, touched): one recvmmsg of up to `batch`
 *   datagrams, each handed to its QP's receive with its CE mark (IPv6 traffic class); one
 *   longer than `size` is dropped and counted, an exception in a receive raised after the batch.
 * Sender(batch, arena): send_out(fd, out, names, gso, control, planes) queues a QP's
 *   datagrams, flush() sends what is queued in sendmmsg calls; a message the kernel refuses is
 *   dropped and counted.
 * data_datagram(flags, ev, length, qp, psn, offset, imm, prev, ts, payload) -> bytes
 * decode(datagram) -> (Header, payload): the 40-byte header in Header's field order (version
 *   last) and a memoryview of the rest; WireError for a datagram that is not ours.
 * crc32(data, value=0) -> int: zlib.crc32's result, folded with PCLMULQDQ (_crc32.c).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/udp.h>
#include "_crc32.h"

#define CONTROL_SPACE 24 /* CMSG_SPACE(4): one int (IPV6_TCLASS) or one u16 (UDP_SEGMENT) */
#define NAME_SIZE 28     /* struct sockaddr_in6 */
#define HEADER_SIZE 40
#define VERSION 1
#define DATA 1
#define MAX_TYPE 5

static inline void put16(unsigned char *p, unsigned long v) {
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}
static inline void put32(unsigned char *p, unsigned long v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}
static inline unsigned long get16(const unsigned char *p) {
    return ((unsigned long)p[0] << 8) | p[1];
}
static inline unsigned long get32(const unsigned char *p) {
    return ((unsigned long)p[0] << 24) | ((unsigned long)p[1] << 16)
           | ((unsigned long)p[2] << 8) | p[3];
}

/* A file descriptor from a Python int (PyLong_AsInt is Python 3.13's). */
static int as_fd(PyObject *o) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0 || v > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "not a file descriptor");
        return -1;
    }
    return (int)v;
}

/* ---- Receiver ---- */

typedef struct {
    PyObject_HEAD
    unsigned int batch;
    Py_ssize_t size;
    unsigned char *data;
    unsigned char *control;
    struct iovec *iov;
    struct mmsghdr *hdr;          /* NULL until __init__ succeeded */
    int dispatching;              /* in dispatch: the buffers hold the batch being handed out */
    unsigned long long calls;     /* recvmmsg calls made */
    unsigned long long datagrams; /* datagrams they returned */
    unsigned long long truncated; /* of those, longer than `size`: dropped */
} Receiver;

static void receiver_free(Receiver *self) {
    PyMem_Free(self->data);
    PyMem_Free(self->control);
    PyMem_Free(self->iov);
    PyMem_Free(self->hdr);
    self->data = self->control = NULL;
    self->iov = NULL;
    self->hdr = NULL;
}

static void Receiver_dealloc(Receiver *self) {
    receiver_free(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The buffers are allocated once: a second __init__ is refused rather than swapping them (a
 * receive calling it from inside dispatch would free the batch being handed out), and a failed
 * one leaves none behind. */
static int Receiver_init(Receiver *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"batch", "size", NULL};
    unsigned int batch = 64;
    Py_ssize_t size = 65536;
    if (self->hdr != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Receiver is already initialised: make a new one");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|In", kwlist, &batch, &size))
        return -1;
    if (batch == 0 || size <= 0) {
        PyErr_SetString(PyExc_ValueError, "batch and size must be positive");
        return -1;
    }
    if ((size_t)size > (size_t)PY_SSIZE_T_MAX / batch) {
        PyErr_SetString(PyExc_ValueError, "batch x size does not fit in memory");
        return -1;
    }
    self->data = PyMem_Malloc((size_t)batch * (size_t)size);
    self->control = PyMem_Calloc(batch, CONTROL_SPACE);
    self->iov = PyMem_Calloc(batch, sizeof(struct iovec));
    self->hdr = PyMem_Calloc(batch, sizeof(struct mmsghdr));
    if (!self->data || !self->control || !self->iov || !self->hdr) {
        receiver_free(self); /* all or nothing: hdr == NULL still says "not initialised" */
        PyErr_NoMemory();
        return -1;
    }
    self->batch = batch;
    self->size = size;
    for (unsigned int i = 0; i < batch; i++) {
        self->iov[i].iov_base = self->data + (size_t)i * (size_t)size;
        self->iov[i].iov_len = (size_t)size;
        self->hdr[i].msg_hdr.msg_iov = &self->iov[i];
        self->hdr[i].msg_hdr.msg_iovlen = 1;
        self->hdr[i].msg_hdr.msg_control = self->control + (size_t)i * CONTROL_SPACE;
    }
    return 0;
}

/* The traffic class the kernel reported in message i's ancillary data, or -1. */
static int tclass_of(struct msghdr *m) {
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS
            && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int value;
            memcpy(&value, CMSG_DATA(c), sizeof value);
            return value;
        }
    }
    return -1;
}

/* Datagram `p` (`len` bytes, at least a header) to receivers[its QP number](datagram, now, ce);
 * its QP number joins `touched` when that returns. Unknown QPs: dropped. -1: an exception. */
static int deliver(PyObject *receivers, const unsigned char *p, Py_ssize_t len, PyObject *now,
                   int ce, PyObject *touched) {
    PyObject *qpn = PyLong_FromUnsignedLong(get32(p + 8));
    if (qpn == NULL)
        return -1;
    PyObject *receive = PyDict_GetItemWithError(receivers, qpn); /* borrowed */
    if (receive == NULL) {
        Py_DECREF(qpn);
        return PyErr_Occurred() ? -1 : 0;
    }
    PyObject *data = PyBytes_FromStringAndSize((const char *)p, len);
    if (data == NULL) {
        Py_DECREF(qpn);
        return -1;
    }
    PyObject *call[3] = {data, now, ce ? Py_True : Py_False};
    Py_INCREF(receive); /* the call may change the dict */
    PyObject *r = PyObject_Vectorcall(receive, call, 3, NULL);
    Py_DECREF(receive);
    Py_DECREF(data);
    int status = (r == NULL || PySet_Add(touched, qpn) < 0) ? -1 : 0;
    Py_XDECREF(r);
    Py_DECREF(qpn);
    return status;
}

/* dispatch(fd, receivers, now, touched) -> n: one recvmmsg; each datagram long enough to carry
 * a header goes to its QP (deliver). `ce`: the traffic class says Congestion Experienced.
 * A datagram longer than `size` arrives cut (MSG_TRUNC): it is dropped and counted, as a NIC
 * drops a frame longer than its buffers, since a cut DATA packet would read as a trim.
 * An exception in one receive does not lose the others: they were read from the socket and
 * exist nowhere else, so every datagram of the batch is still delivered, then the first
 * exception is raised (later ones go to sys.unraisablehook). */
static PyObject *Receiver_dispatch(Receiver *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyDict_Check(args[1]) || !PySet_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "dispatch(fd, receivers: dict, now, touched: set)");
        return NULL;
    }
    if (self->hdr == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Receiver is not initialised");
        return NULL;
    }
    if (self->dispatching) {
        PyErr_SetString(PyExc_RuntimeError, "dispatch called from a receive: the batch being "
                                            "delivered would be overwritten");
        return NULL;
    }
    int fd = as_fd(args[0]);
    if (fd < 0)
        return NULL;
    PyObject *receivers = args[1], *now = args[2], *touched = args[3];
    for (unsigned int i = 0; i < self->batch; i++) {
        self->hdr[i].msg_hdr.msg_controllen = CONTROL_SPACE;
        self->hdr[i].msg_hdr.msg_flags = 0;
    }
    int n = recvmmsg(fd, self->hdr, self->batch, MSG_DONTWAIT, NULL);
    self->calls++;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return PyErr_SetFromErrno(PyExc_OSError);
    if (n < 0)
        n = 0;
    self->datagrams += (unsigned long long)n;
    PyObject *first_type = NULL, *first_value = NULL, *first_tb = NULL;
    self->dispatching = 1;
    for (int i = 0; i < n; i++) {
        struct msghdr *m = &self->hdr[i].msg_hdr;
        Py_ssize_t len = (Py_ssize_t)self->hdr[i].msg_len;
        if (m->msg_flags & MSG_TRUNC) {
            self->truncated++;
            continue;
        }
        if (len < HEADER_SIZE)
            continue;
        int tclass = tclass_of(m);
        int ce = tclass >= 0 && (tclass & 0x3) == 0x3;
        if (deliver(receivers, self->iov[i].iov_base, len, now, ce, touched) < 0) {
            if (first_type == NULL)
                PyErr_Fetch(&first_type, &first_value, &first_tb);
            else
                PyErr_WriteUnraisable((PyObject *)self);
        }
    }
    self->dispatching = 0;
    if (first_type != NULL) {
        PyErr_Restore(first_type, first_value, first_tb);
        return NULL;
    }
    return PyLong_FromLong(n);
}

static PyMethodDef Receiver_methods[] = {
    {"dispatch", (PyCFunction)(void (*)(void))Receiver_dispatch, METH_FASTCALL,
     "dispatch(fd, receivers, now, touched) -> datagrams read: one recvmmsg, each datagram "
     "handed to receivers[its QP number](datagram, now, ce); their QP numbers join `touched`. "
     "Datagrams longer than `size` are dropped (`truncated`); an exception in a receive is "
     "raised once every datagram of the batch was handed out."},
    {NULL}};

static PyMemberDef Receiver_members[] = {
    {"batch", T_UINT, offsetof(Receiver, batch), READONLY, "datagrams per call at most"},
    {"size", T_PYSSIZET, offsetof(Receiver, size), READONLY, "bytes per datagram at most"},
    {"calls", T_ULONGLONG, offsetof(Receiver, calls), READONLY, "recvmmsg calls made"},
    {"datagrams", T_ULONGLONG, offsetof(Receiver, datagrams), READONLY,
     "datagrams they returned"},
    {"truncated", T_ULONGLONG, offsetof(Receiver, truncated), READONLY,
     "of those, longer than `size` and dropped"},
    {NULL}};

static PyTypeObject ReceiverType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hostagent._fastio.Receiver",
    .tp_basicsize = sizeof(Receiver),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "recvmmsg into fixed buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Receiver_init,
    .tp_dealloc = (destructor)Receiver_dealloc,
    .tp_methods = Receiver_methods,
    .tp_members = Receiver_members,
};

/* ---- Sender ---- */

typedef struct {
    PyObject_HEAD
    unsigned int batch;
    size_t arena;
    unsigned char *data;
    unsigned char *names;
    unsigned char *control;
    struct iovec *iov;
    struct mmsghdr *hdr; /* NULL until __init__ succeeded */
    int fd;
    unsigned int n;    /* messages queued */
    size_t used;       /* arena bytes they hold */
    unsigned long long dropped;  /* messages the kernel refused */
    unsigned long long calls;    /* sendmmsg calls made */
    unsigned long long messages; /* messages they carried */
} Sender;

static void sender_free(Sender *self) {
    PyMem_Free(self->data);
    PyMem_Free(self->names);
    PyMem_Free(self->control);
    PyMem_Free(self->iov);
    PyMem_Free(self->hdr);
    self->data = self->names = self->control = NULL;
    self->iov = NULL;
    self->hdr = NULL;
}

static void Sender_dealloc(Sender *self) {
    sender_free(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Allocated once, as the Receiver's: a second __init__ would have to drop or send what is
 * queued, so it is refused; a failed one leaves nothing behind. */
static int Sender_init(Sender *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"batch", "arena", NULL};
    unsigned int batch = 64;
    Py_ssize_t arena = 1 << 20;
    if (self->hdr != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Sender is already initialised: make a new one");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|In", kwlist, &batch, &arena))
        return -1;
    if (batch == 0 || arena <= 0) {
        PyErr_SetString(PyExc_ValueError, "batch and arena must be positive");
        return -1;
    }
    self->data = PyMem_Malloc((size_t)arena);
    self->names = PyMem_Calloc(batch, 32);
    self->control = PyMem_Calloc(batch, CONTROL_SPACE);
    self->iov = PyMem_Calloc(batch, sizeof(struct iovec));
    self->hdr = PyMem_Calloc(batch, sizeof(struct mmsghdr));
    if (!self->data || !self->names || !self->control || !self->iov || !self->hdr) {
        sender_free(self); /* all or nothing: hdr == NULL still says "not initialised" */
        PyErr_NoMemory();
        return -1;
    }
    self->batch = batch;
    self->arena = (size_t)arena;
    for (unsigned int i = 0; i < batch; i++) {
        self->hdr[i].msg_hdr.msg_name = self->names + (size_t)i * 32;
        self->hdr[i].msg_hdr.msg_namelen = NAME_SIZE;
        self->hdr[i].msg_hdr.msg_iov = &self->iov[i];
        self->hdr[i].msg_hdr.msg_iovlen = 1;
        self->hdr[i].msg_hdr.msg_control = self->control + (size_t)i * CONTROL_SPACE;
    }
    self->fd = -1;
    return 0;
}

static void sender_flush(Sender *self) {
    unsigned int n = self->n, done = 0;
    if (n == 0)
        return;
    self->messages += n;
    while (done < n) {
        self->calls++;
        int sent = sendmmsg(self->fd, self->hdr + done, n - done, MSG_DONTWAIT);
        if (sent < 0) {
            if (errno == EINTR)
                continue;
            sent = 1; /* this one failed (full, unreachable...): lost, as with sendto */
            self->dropped++;
        }
        done += (unsigned int)sent;
    }
    self->n = 0;
    self->used = 0;
}

static PyObject *Sender_flush(Sender *self, PyObject *Py_UNUSED(ignored)) {
    sender_flush(self);
    Py_RETURN_NONE;
}

/* Room for one message of `size` bytes to `name` (28 bytes), flushing first if the batch or
 * the arena is full or the socket changes: where to copy its bytes. */
static unsigned char *sender_put(Sender *self, int fd, size_t size, const void *name,
                                 const void *control, size_t controllen) {
    if (fd != self->fd || self->n == self->batch || self->used + size > self->arena) {
        sender_flush(self);
        self->fd = fd;
    }
    unsigned int i = self->n;
    unsigned char *at = self->data + self->used;
    memcpy(self->names + (size_t)i * 32, name, NAME_SIZE);
    self->iov[i].iov_base = at;
    self->iov[i].iov_len = size;
    if (controllen > 0)
        memcpy(self->control + (size_t)i * CONTROL_SPACE, control, controllen);
    self->hdr[i].msg_hdr.msg_controllen = controllen;
    self->used += size;
    self->n = i + 1;
    return at;
}

#define GSO_MAX_SEGMENTS 64
#define GSO_MAX_BYTES 65000

/* The ancillary data of one UDP GSO message: cut into datagrams of `segment` bytes. */
static size_t gso_control(unsigned char *buf, uint16_t segment) {
    memset(buf, 0, CONTROL_SPACE);
    struct cmsghdr *c = (struct cmsghdr *)buf;
    c->cmsg_len = CMSG_LEN(sizeof segment);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    memcpy(CMSG_DATA(c), &segment, sizeof segment);
    return CONTROL_SPACE;
}

/* send_out(fd, out, names, gso, control, planes) -> [(plane, bytes, datagrams)]: queue a QP's
 * `out` (a list of (EV, datagram)) to names[EV]. DATA datagrams go plain or, with `gso`, a run
 * of consecutive ones to the same EV in one UDP GSO message (at most 64 and 65000 bytes).
 * The kernel cuts a GSO message into segments of gso_size bytes, the last one shorter or not,
 * so a run is what those cuts give back unchanged: datagrams of exactly the first one's size,
 * then at most one shorter, which ends it. (A full datagram behind a short one would be cut at
 * the short size: a false trim for MRC, a corrupt packet for RoCEv2.) Others (ACK, NACK,
 * probes) carry `control` (their traffic class). With `planes` (EV -> plane), returns the DATA
 * bytes and datagrams queued per plane, in the order the planes first appear, for the NIC's
 * accounting. */
static PyObject *Sender_send_out(Sender *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyList_Check(args[1]) || !PyDict_Check(args[2])
        || !PyBytes_Check(args[4]) || PyBytes_GET_SIZE(args[4]) > CONTROL_SPACE
        || (args[5] != Py_None && !PyDict_Check(args[5]))) {
        PyErr_SetString(PyExc_TypeError, "send_out(fd, out: list, names: dict, gso: bool, "
                                         "control: bytes, planes: dict | None)");
        return NULL;
    }
    if (self->hdr == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Sender is not initialised");
        return NULL;
    }
    int fd = as_fd(args[0]);
    if (fd < 0)
        return NULL;
    PyObject *out = args[1], *names = args[2], *planes = args[5];
    int gso = PyObject_IsTrue(args[3]);
    if (gso < 0)
        return NULL;
    const char *control = PyBytes_AS_STRING(args[4]);
    size_t controllen = (size_t)PyBytes_GET_SIZE(args[4]);
    enum { MAX_PLANES = 64 };
    unsigned long long plane_bytes[MAX_PLANES] = {0}, plane_count[MAX_PLANES] = {0};
    int order[MAX_PLANES], seen = 0;
    Py_ssize_t n = PyList_GET_SIZE(out), i = 0;
    while (i < n) {
        PyObject *item = PyList_GET_ITEM(out, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2
            || !PyBytes_Check(PyTuple_GET_ITEM(item, 1))) {
            PyErr_SetString(PyExc_TypeError, "out: a list of (EV, bytes)");
            return NULL;
        }
        PyObject *ev = PyTuple_GET_ITEM(item, 0), *datagram = PyTuple_GET_ITEM(item, 1);
        Py_ssize_t size = PyBytes_GET_SIZE(datagram);
        int is_data = size > 1 && (unsigned char)PyBytes_AS_STRING(datagram)[1] == DATA;
        Py_ssize_t j = i + 1, total = size;
        if (gso && is_data) {
            while (j < n && j - i < GSO_MAX_SEGMENTS) {
                PyObject *next = PyList_GET_ITEM(out, j);
                if (!PyTuple_Check(next) || PyTuple_GET_SIZE(next) != 2
                    || !PyBytes_Check(PyTuple_GET_ITEM(next, 1)))
                    break;
                PyObject *d = PyTuple_GET_ITEM(next, 1);
                Py_ssize_t d_size = PyBytes_GET_SIZE(d);
                int same_ev = PyObject_RichCompareBool(PyTuple_GET_ITEM(next, 0), ev, Py_EQ);
                if (same_ev < 0)
                    return NULL;
                if (!same_ev || d_size < 2 || (unsigned char)PyBytes_AS_STRING(d)[1] != DATA
                    || d_size > size || (j - i + 1) * size > GSO_MAX_BYTES)
                    break;
                total += d_size;
                j++;
                if (d_size < size)
                    break; /* the one shorter segment is the last */
            }
        }
        PyObject *name = PyDict_GetItemWithError(names, ev); /* borrowed */
        if (name == NULL || !PyBytes_Check(name) || PyBytes_GET_SIZE(name) != NAME_SIZE) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "no socket address for this EV");
            return NULL;
        }
        if ((size_t)total > self->arena) {
            PyErr_SetString(PyExc_ValueError, "message larger than the staging arena");
            return NULL;
        }
        unsigned char gso_buf[CONTROL_SPACE];
        unsigned char *at;
        if (j - i > 1)
            at = sender_put(self, fd, (size_t)total, PyBytes_AS_STRING(name), gso_buf,
                            gso_control(gso_buf, (uint16_t)size));
        else
            at = sender_put(self, fd, (size_t)size, PyBytes_AS_STRING(name),
                            is_data ? NULL : control, is_data ? 0 : controllen);
        for (Py_ssize_t k = i; k < j; k++) {
            PyObject *d = PyTuple_GET_ITEM(PyList_GET_ITEM(out, k), 1);
            memcpy(at, PyBytes_AS_STRING(d), (size_t)PyBytes_GET_SIZE(d));
            at += PyBytes_GET_SIZE(d);
        }
        if (planes != Py_None && is_data) {
            for (Py_ssize_t k = i; k < j; k++) {
                PyObject *e = PyTuple_GET_ITEM(PyList_GET_ITEM(out, k), 0);
                PyObject *plane_obj = PyDict_GetItemWithError(planes, e);
                if (plane_obj == NULL) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_KeyError, "no plane for this EV");
                    return NULL;
                }
                long plane = PyLong_AsLong(plane_obj);
                if (plane == -1 && PyErr_Occurred())
                    return NULL;
                if (plane < 0 || plane >= MAX_PLANES) {
                    PyErr_SetString(PyExc_ValueError, "plane out of range");
                    return NULL;
                }
                if (plane_count[plane] == 0)
                    order[seen++] = (int)plane;
                plane_bytes[plane] += (unsigned long long)PyBytes_GET_SIZE(
                    PyTuple_GET_ITEM(PyList_GET_ITEM(out, k), 1));
                plane_count[plane]++;
            }
        }
        i = j;
    }
    PyObject *result = PyList_New(seen);
    if (result == NULL)
        return NULL;
    for (int k = 0; k < seen; k++) {
        PyObject *t = Py_BuildValue("(iKK)", order[k], plane_bytes[order[k]],
                                    plane_count[order[k]]);
        if (t == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyList_SET_ITEM(result, k, t);
    }
    return result;
}

static PyMethodDef Sender_methods[] = {
    {"send_out", (PyCFunction)(void (*)(void))Sender_send_out, METH_FASTCALL,
     "send_out(fd, out, names, gso, control, planes) -> [(plane, bytes, datagrams)]: queue a "
     "QP's (EV, datagram) list, DATA runs to one EV as UDP GSO messages when `gso`."},
    {"flush", (PyCFunction)Sender_flush, METH_NOARGS, "Send what is queued."},
    {NULL}};

static PyMemberDef Sender_members[] = {
    {"batch", T_UINT, offsetof(Sender, batch), READONLY, "messages per call at most"},
    {"dropped", T_ULONGLONG, offsetof(Sender, dropped), READONLY,
     "messages the kernel refused"},
    {"calls", T_ULONGLONG, offsetof(Sender, calls), READONLY, "sendmmsg calls made"},
    {"messages", T_ULONGLONG, offsetof(Sender, messages), READONLY,
     "messages they carried (a GSO message carries several datagrams)"},
    {NULL}};

static PyTypeObject SenderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hostagent._fastio.Sender",
    .tp_basicsize = sizeof(Sender),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "sendmmsg from a staging area.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Sender_init,
    .tp_dealloc = (destructor)Sender_dealloc,
    .tp_methods = Sender_methods,
    .tp_members = Sender_members,
};

/* ---- the header ---- */

static PyTypeObject *header_type = NULL; /* wire.Header, set by bind() */
static PyObject *wire_error = NULL;      /* wire.WireError */
static PyObject *payload_slice = NULL;   /* slice(HEADER_SIZE, None) */

/* An unsigned field that must fit `bits` bits (struct.pack's range check). */
static int field(PyObject *o, int bits, unsigned long long *out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (bits < 64 && v >> bits) {
        PyErr_Format(PyExc_OverflowError, "header field out of range (%d bits)", bits);
        return -1;
    }
    *out = v;
    return 0;
}

static PyObject *data_datagram(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    /* flags ev length qp psn offset imm prev ts payload */
    static const int bits[9] = {16, 16, 16, 32, 32, 64, 32, 32, 32};
    unsigned long long f[9];
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "data_datagram takes 10 arguments");
        return NULL;
    }
    for (int i = 0; i < 9; i++)
        if (field(args[i], bits[i], &f[i]) < 0)
            return NULL;
    Py_buffer payload;
    if (PyObject_GetBuffer(args[9], &payload, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, HEADER_SIZE + payload.len);
    if (out != NULL) {
        unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
        p[0] = VERSION;
        p[1] = DATA;
        put16(p + 2, f[0]);
        put16(p + 4, f[1]);
        put16(p + 6, f[2]);
        put32(p + 8, f[3]);
        put32(p + 12, f[4]);
        put32(p + 16, f[5] >> 32);
        put32(p + 20, f[5]);
        put32(p + 24, f[6]);
        put32(p + 28, f[7]);
        put32(p + 32, f[8]);
        memcpy(p + HEADER_SIZE, payload.buf, (size_t)payload.len);
        /* CRC-32 of the payload, as zlib.crc32 computes it (from the copy: it is in cache) */
        put32(p + 36, crc32_fast(0, p + HEADER_SIZE, (size_t)payload.len));
    }
    PyBuffer_Release(&payload);
    return out;
}

static PyObject *header_of(PyObject *datagram) {
    if (header_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_fastio.bind() was not called");
        return NULL;
    }
    Py_buffer b;
    if (PyObject_GetBuffer(datagram, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = b.buf;
    if (b.len < HEADER_SIZE) {
        PyErr_Format(wire_error, "%zd bytes: shorter than the %d-byte header", b.len,
                     HEADER_SIZE);
        PyBuffer_Release(&b);
        return NULL;
    }
    if (p[0] != VERSION || p[1] < DATA || p[1] > MAX_TYPE) {
        if (p[0] != VERSION)
            PyErr_Format(wire_error, "version %d, expected %d", p[0], VERSION);
        else
            PyErr_Format(wire_error, "unknown packet type %d", p[1]);
        PyBuffer_Release(&b);
        return NULL;
    }
    /* Header's fields: type flags ev length qp psn offset imm aux ts crc version */
    unsigned long long v[12] = {
        p[1], get16(p + 2), get16(p + 4), get16(p + 6), get32(p + 8), get32(p + 12),
        ((unsigned long long)get32(p + 16) << 32) | get32(p + 20), get32(p + 24),
        get32(p + 28), get32(p + 32), get32(p + 36), p[0]};
    PyBuffer_Release(&b);
    PyObject *h = header_type->tp_alloc(header_type, 12); /* a tuple subclass: no __dict__ */
    if (h == NULL)
        return NULL;
    for (int i = 0; i < 12; i++) {
        PyObject *item = PyLong_FromUnsignedLongLong(v[i]);
        if (item == NULL) {
            Py_DECREF(h);
            return NULL;
        }
        PyTuple_SET_ITEM(h, i, item);
    }
    return h;
}

static PyObject *decode(PyObject *module, PyObject *datagram) {
    PyObject *h = header_of(datagram);
    if (h == NULL)
        return NULL;
    PyObject *view = PyMemoryView_FromObject(datagram);
    PyObject *payload = view ? PyObject_GetItem(view, payload_slice) : NULL;
    Py_XDECREF(view);
    if (payload == NULL) {
        Py_DECREF(h);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(2, h, payload);
    Py_DECREF(h);
    Py_DECREF(payload);
    return out;
}

static PyObject *bind_classes(PyObject *module, PyObject *args) {
    PyObject *type, *error;
    if (!PyArg_ParseTuple(args, "O!O", &PyType_Type, &type, &error))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "the header type must be a tuple (NamedTuple)");
        return NULL;
    }
    Py_INCREF(type);
    Py_INCREF(error);
    Py_XSETREF(header_type, (PyTypeObject *)type);
    Py_XSETREF(wire_error, error);
    Py_RETURN_NONE;
}

static PyObject *crc32(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    unsigned long long value = 0;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "crc32(data, value=0)");
        return NULL;
    }
    if (nargs == 2 && field(args[1], 32, &value) < 0)
        return NULL;
    Py_buffer data;
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t crc = crc32_fast((uint32_t)value, data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef module_methods[] = {
    {"crc32", (PyCFunction)(void (*)(void))crc32, METH_FASTCALL,
     "crc32(data, value=0) -> int: zlib.crc32(data, value), faster."},
    {"data_datagram", (PyCFunction)(void (*)(void))data_datagram, METH_FASTCALL,
     "A DATA header and its payload, the CRC-32 of the payload in the header."},
    {"decode", decode, METH_O,
     "decode(datagram) -> (Header, memoryview of the payload); raises WireError."},
    {"bind", bind_classes, METH_VARARGS, "bind(Header, WireError): the classes decode uses."},
    {NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_fastio",
    .m_doc = "The agents' per-datagram work in C.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__fastio(void) {
    if (PyType_Ready(&ReceiverType) < 0 || PyType_Ready(&SenderType) < 0)
        return NULL;
    PyObject *start = PyLong_FromLong(HEADER_SIZE);
    if (start == NULL)
        return NULL;
    payload_slice = PySlice_New(start, Py_None, Py_None);
    Py_DECREF(start);
    if (payload_slice == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ReceiverType);
    Py_INCREF(&SenderType);
    if (PyModule_AddObject(m, "Receiver", (PyObject *)&ReceiverType) < 0
        || PyModule_AddObject(m, "Sender", (PyObject *)&SenderType) < 0
        || PyModule_AddIntConstant(m, "CONTROL_SPACE", CONTROL_SPACE) < 0
        || PyModule_AddIntConstant(m, "HEADER_SIZE", HEADER_SIZE) < 0
        || PyModule_AddIntConstant(m, "CRC32_FOLDS", crc32_folds()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
