/* The agents' per-datagram work in C: batched socket IO and the transport header.
 *
 * Why C: profiled on bench/agent.py, what an agent spent per packet outside the protocol's
 * decisions was Python moving bytes: filling sendmmsg's structures one memoryview write at a
 * time, turning recvmmsg's buffers into bytes and traffic classes, packing a header and
 * concatenating the payload behind it, unpacking a header into a tuple. Each of these is a few
 * lines of C and a fraction of the Python's cost. The protocol (qp.py, mrc.py, rocev2.py...)
 * stays Python and sans-IO; hostagent/batchio.py and hostagent/wire.py are the only callers.
 *
 * Built by `make ext` (scripts/install.sh runs it): gcc, the Python headers, zlib.
 *
 * Receiver(batch, size): recv(fd) -> (list[bytes], list[int]): up to `batch` datagrams and
 *   each one's IPv6 traffic class (-1 when the socket reported none).
 * Sender(batch, arena): add(fd, datagram, name, control=None) queues one message, flush()
 *   sends what is queued in sendmmsg calls; a message the kernel refuses is dropped, counted.
 * data_datagram(flags, ev, length, qp, psn, offset, imm, prev, ts, payload) -> bytes
 * decode(datagram) -> (Header, payload): the 40-byte header in Header's field order (version
 *   last) and a memoryview of the rest; WireError for a datagram that is not ours.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <zlib.h>

#define CONTROL_SPACE 24 /* CMSG_SPACE(4): one int (IPV6_TCLASS) or one u16 (UDP_SEGMENT) */
#define NAME_SIZE 28     /* struct sockaddr_in6 */
#define HEADER_SIZE 40
#define VERSION 1
#define DATA 1
#define MAX_TYPE 5

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
    struct mmsghdr *hdr;
    unsigned long long calls;     /* recvmmsg calls made */
    unsigned long long datagrams; /* datagrams they returned */
} Receiver;

static void Receiver_dealloc(Receiver *self) {
    PyMem_Free(self->data);
    PyMem_Free(self->control);
    PyMem_Free(self->iov);
    PyMem_Free(self->hdr);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Receiver_init(Receiver *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"batch", "size", NULL};
    unsigned int batch = 64;
    Py_ssize_t size = 65536;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|In", kwlist, &batch, &size))
        return -1;
    if (batch == 0 || size <= 0) {
        PyErr_SetString(PyExc_ValueError, "batch and size must be positive");
        return -1;
    }
    self->batch = batch;
    self->size = size;
    self->data = PyMem_Malloc((size_t)batch * (size_t)size);
    self->control = PyMem_Calloc(batch, CONTROL_SPACE);
    self->iov = PyMem_Calloc(batch, sizeof(struct iovec));
    self->hdr = PyMem_Calloc(batch, sizeof(struct mmsghdr));
    if (!self->data || !self->control || !self->iov || !self->hdr) {
        PyErr_NoMemory();
        return -1;
    }
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

static PyObject *Receiver_recv(Receiver *self, PyObject *arg) {
    int fd = as_fd(arg);
    if (fd < 0)
        return NULL;
    for (unsigned int i = 0; i < self->batch; i++) {
        self->hdr[i].msg_hdr.msg_controllen = CONTROL_SPACE; /* the kernel writes back its use */
        self->hdr[i].msg_hdr.msg_flags = 0;
    }
    int n = recvmmsg(fd, self->hdr, self->batch, MSG_DONTWAIT, NULL);
    self->calls++;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return PyErr_SetFromErrno(PyExc_OSError);
    if (n < 0)
        n = 0;
    self->datagrams += (unsigned long long)n;
    PyObject *datagrams = PyList_New(n), *classes = PyList_New(n);
    if (!datagrams || !classes)
        goto fail;
    for (int i = 0; i < n; i++) {
        PyObject *d = PyBytes_FromStringAndSize((const char *)self->iov[i].iov_base,
                                                (Py_ssize_t)self->hdr[i].msg_len);
        PyObject *c = PyLong_FromLong(tclass_of(&self->hdr[i].msg_hdr));
        if (!d || !c) {
            Py_XDECREF(d);
            Py_XDECREF(c);
            goto fail;
        }
        PyList_SET_ITEM(datagrams, i, d);
        PyList_SET_ITEM(classes, i, c);
    }
    PyObject *out = PyTuple_Pack(2, datagrams, classes);
    Py_DECREF(datagrams);
    Py_DECREF(classes);
    return out;
fail:
    Py_XDECREF(datagrams);
    Py_XDECREF(classes);
    return NULL;
}

static PyMethodDef Receiver_methods[] = {
    {"recv", (PyCFunction)Receiver_recv, METH_O,
     "recv(fd) -> (datagrams, traffic classes): up to `batch` datagrams waiting on fd "
     "(non-blocking); empty lists when none waits."},
    {NULL}};

static PyMemberDef Receiver_members[] = {
    {"batch", T_UINT, offsetof(Receiver, batch), READONLY, "datagrams per call at most"},
    {"size", T_PYSSIZET, offsetof(Receiver, size), READONLY, "bytes per datagram at most"},
    {"calls", T_ULONGLONG, offsetof(Receiver, calls), READONLY, "recvmmsg calls made"},
    {"datagrams", T_ULONGLONG, offsetof(Receiver, datagrams), READONLY,
     "datagrams they returned"},
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
    struct mmsghdr *hdr;
    int fd;
    unsigned int n;    /* messages queued */
    size_t used;       /* arena bytes they hold */
    unsigned long long dropped;  /* messages the kernel refused */
    unsigned long long calls;    /* sendmmsg calls made */
    unsigned long long messages; /* messages they carried */
} Sender;

static void Sender_dealloc(Sender *self) {
    PyMem_Free(self->data);
    PyMem_Free(self->names);
    PyMem_Free(self->control);
    PyMem_Free(self->iov);
    PyMem_Free(self->hdr);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Sender_init(Sender *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"batch", "arena", NULL};
    unsigned int batch = 64;
    Py_ssize_t arena = 1 << 20;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|In", kwlist, &batch, &arena))
        return -1;
    if (batch == 0 || arena <= 0) {
        PyErr_SetString(PyExc_ValueError, "batch and arena must be positive");
        return -1;
    }
    self->batch = batch;
    self->arena = (size_t)arena;
    self->data = PyMem_Malloc(self->arena);
    self->names = PyMem_Calloc(batch, 32);
    self->control = PyMem_Calloc(batch, CONTROL_SPACE);
    self->iov = PyMem_Calloc(batch, sizeof(struct iovec));
    self->hdr = PyMem_Calloc(batch, sizeof(struct mmsghdr));
    if (!self->data || !self->names || !self->control || !self->iov || !self->hdr) {
        PyErr_NoMemory();
        return -1;
    }
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

static PyObject *Sender_add(Sender *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "add(fd, datagram, name, control=None)");
        return NULL;
    }
    int fd = as_fd(args[0]);
    if (fd < 0)
        return NULL;
    Py_buffer data, name, control = {0};
    if (PyObject_GetBuffer(args[1], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[2], &name, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    int has_control = nargs == 4 && args[3] != Py_None;
    if (has_control && PyObject_GetBuffer(args[3], &control, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&name);
        return NULL;
    }
    PyObject *result = NULL;
    size_t size = (size_t)data.len;
    if (name.len != NAME_SIZE || (has_control && control.len > CONTROL_SPACE)) {
        PyErr_SetString(PyExc_ValueError, "name must be a sockaddr_in6 (28 bytes), control "
                                          "at most 24 bytes");
        goto done;
    }
    if (size > self->arena) {
        PyErr_SetString(PyExc_ValueError, "datagram larger than the staging arena");
        goto done;
    }
    if (fd != self->fd || self->n == self->batch || self->used + size > self->arena) {
        sender_flush(self);
        self->fd = fd;
    }
    unsigned int i = self->n;
    memcpy(self->data + self->used, data.buf, size);
    memcpy(self->names + (size_t)i * 32, name.buf, NAME_SIZE);
    self->iov[i].iov_base = self->data + self->used;
    self->iov[i].iov_len = size;
    if (has_control && control.len > 0) {
        memcpy(self->control + (size_t)i * CONTROL_SPACE, control.buf, (size_t)control.len);
        self->hdr[i].msg_hdr.msg_controllen = (size_t)control.len;
    } else {
        self->hdr[i].msg_hdr.msg_controllen = 0;
    }
    self->used += size;
    self->n = i + 1;
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&name);
    if (has_control)
        PyBuffer_Release(&control);
    return result;
}

static PyMethodDef Sender_methods[] = {
    {"add", (PyCFunction)(void (*)(void))Sender_add, METH_FASTCALL,
     "add(fd, datagram, name, control=None): queue one message (a datagram, or with a GSO "
     "control several in one) to the socket address `name`; sent at the latest when the "
     "batch is full or fd changes."},
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
        put32(p + 36, crc32_z(0, p + HEADER_SIZE, (size_t)payload.len));
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

static PyMethodDef module_methods[] = {
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
        || PyModule_AddIntConstant(m, "HEADER_SIZE", HEADER_SIZE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
