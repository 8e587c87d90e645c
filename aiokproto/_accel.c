/* aiokproto._accel: the compiled form of the record codec's hot loops (v2 record
 * decode, record encode, murmur2) and of parts of the producer: the record builder and
 * delivery-handle types, send()'s common case (bind_send and send_fast read and write
 * the __slots__ of producer classes).
 *
 * The Python functions named beside each entry point are the readable reference; these
 * must give the same results (tests/unit/test_accel.py compares them on generated
 * and hostile input). aiokproto/accel.py loads this module unless
 * AIOKPROTO_PURE_PYTHON=1, and everything works without it.
 *
 * Errors in the data raise ValueError with the reason; the Python callers turn them
 * into CorruptRecordError naming the batch. (The Spark source's Arrow builder is not
 * here: it belongs to the spark extra, aiokproto/spark/_arrow.c.)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* -- varints ------------------------------------------------------------------------ */

/* LEB128 at buf[*pos], at most `maxbytes` bytes; 0 on success, -1 with ValueError set. */
static inline int
read_uvarint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int maxbytes,
             uint64_t *out)
{
    Py_ssize_t p = *pos;
    if (p < end && buf[p] < 0x80) { /* the common one-byte case */
        *out = buf[p];
        *pos = p + 1;
        return 0;
    }
    uint64_t result = 0;
    int shift = 0;
    for (int i = 0; i < maxbytes; i++) {
        if (p >= end) {
            PyErr_SetString(PyExc_ValueError, "truncated varint");
            return -1;
        }
        uint8_t b = buf[p++];
        uint64_t bits = b & 0x7F;
        if (shift == 63 && bits > 1) {
            PyErr_SetString(PyExc_ValueError, "unsigned varlong overflows 64 bits");
            return -1;
        }
        result |= bits << shift;
        if (!(b & 0x80)) {
            *out = result;
            *pos = p;
            return 0;
        }
        shift += 7;
    }
    PyErr_Format(PyExc_ValueError, "varint longer than %d bytes", maxbytes);
    return -1;
}

/* zig-zag signed 32-bit varint (decode_varint) */
static inline int
read_varint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    uint64_t raw;
    if (read_uvarint(buf, pos, end, 5, &raw) < 0)
        return -1;
    if (raw > 0xFFFFFFFFu) {
        PyErr_SetString(PyExc_ValueError, "unsigned varint overflows 32 bits");
        return -1;
    }
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 0;
}

/* zig-zag signed 64-bit varlong (decode_varlong) */
static inline int
read_varlong(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    uint64_t raw;
    if (read_uvarint(buf, pos, end, 10, &raw) < 0)
        return -1;
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 0;
}

static inline Py_ssize_t
write_uvarint(uint8_t *out, uint64_t v)
{
    Py_ssize_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

static inline Py_ssize_t
uvarint_size(uint64_t v)
{
    Py_ssize_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* encode_varint masks the zig-zag form to 32 bits, encode_varlong to 64 */
static inline uint64_t zz32(int64_t v) { return (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31)); }
static inline uint64_t zz64(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

/* -- decoding ------------------------------------------------------------------------ */

/* base + delta as a Python int, exact even where int64 would overflow */
static PyObject *
add_exact(int64_t base, int64_t delta)
{
    int64_t sum;
    if (!__builtin_add_overflow(base, delta, &sum))
        return PyLong_FromLongLong(sum);
    PyObject *a = PyLong_FromLongLong(base), *b = PyLong_FromLongLong(delta), *r = NULL;
    if (a != NULL && b != NULL)
        r = PyNumber_Add(a, b);
    Py_XDECREF(a);
    Py_XDECREF(b);
    return r;
}

static PyObject *
slice_or_fail(const uint8_t *buf, Py_ssize_t pos, int64_t n, Py_ssize_t end,
              Py_ssize_t index, const char *what)
{
    if (n > end - pos) {
        PyErr_Format(PyExc_ValueError, "record %zd: %s of %lld bytes runs past the end",
                     index, what, (long long)n);
        return NULL;
    }
    return PyBytes_FromStringAndSize((const char *)buf + pos, (Py_ssize_t)n);
}

/* the headers of one record (_headers / _decode_headers) */
static PyObject *
decode_headers(const uint8_t *buf, Py_ssize_t *pos_io, Py_ssize_t end, Py_ssize_t index)
{
    Py_ssize_t pos = *pos_io;
    int64_t count;
    if (read_varint(buf, &pos, end, &count) < 0)
        return NULL;
    if (count < 0 || count * 2 > end - pos) {
        PyErr_Format(PyExc_ValueError, "impossible header count %lld", (long long)count);
        return NULL;
    }
    PyObject *headers = PyTuple_New((Py_ssize_t)count);
    if (headers == NULL)
        return NULL;
    for (Py_ssize_t h = 0; h < count; h++) {
        int64_t kl, vl;
        if (read_varint(buf, &pos, end, &kl) < 0)
            goto fail;
        if (kl < 0) {
            PyErr_Format(PyExc_ValueError, "negative header key length %lld", (long long)kl);
            goto fail;
        }
        if (kl > end - pos) {
            PyErr_Format(PyExc_ValueError, "record %zd: header key runs past the end", index);
            goto fail;
        }
        PyObject *hkey = PyUnicode_DecodeUTF8((const char *)buf + pos, (Py_ssize_t)kl,
                                              "strict");
        if (hkey == NULL)
            goto fail;
        pos += (Py_ssize_t)kl;
        if (read_varint(buf, &pos, end, &vl) < 0) {
            Py_DECREF(hkey);
            goto fail;
        }
        PyObject *hvalue;
        if (vl < 0) {
            if (vl != -1) {
                Py_DECREF(hkey);
                PyErr_Format(PyExc_ValueError, "negative header value length %lld",
                             (long long)vl);
                goto fail;
            }
            hvalue = Py_NewRef(Py_None);
        } else {
            hvalue = slice_or_fail(buf, pos, vl, end, index, "header value");
            if (hvalue == NULL) {
                Py_DECREF(hkey);
                goto fail;
            }
            pos += (Py_ssize_t)vl;
        }
        PyObject *pair = PyTuple_Pack(2, hkey, hvalue);
        Py_DECREF(hkey);
        Py_DECREF(hvalue);
        if (pair == NULL)
            goto fail;
        PyObject_GC_UnTrack(pair); /* str and bytes/None: no cycle (see decode_records) */
        PyTuple_SET_ITEM(headers, h, pair);
    }
    PyObject_GC_UnTrack(headers);
    *pos_io = pos;
    return headers;
fail:
    Py_DECREF(headers);
    return NULL;
}

/* A new instance of the tuple subclass `cls` (a NamedTuple) holding `n` items that the
 * caller sets. tuple.__new__ does the same; from 3.14 tuples cache their hash in the
 * object, so there the generic constructor is used instead. */
#if PY_VERSION_HEX < 0x030E0000
#define FAST_SUBTUPLE 1
#else
#define FAST_SUBTUPLE 0
#endif

#if !FAST_SUBTUPLE
static PyObject *
new_record(PyTypeObject *cls, PyObject *items)
{
    PyObject *args = PyTuple_Pack(1, items);
    if (args == NULL)
        return NULL;
    PyObject *r = PyTuple_Type.tp_new(cls, args, NULL);
    Py_DECREF(args);
    return r;
}
#endif

/* The module's state (multi-phase init, PEP 489: one per module object, so per
 * interpreter), filled by accel_exec. */
typedef struct {
    /* How a class made by a class statement deriving from tuple (a NamedTuple) is
     * freed, read from such a class. Other tuple subclasses, such as struct sequences
     * (os.stat_result), free their items their own way and must not be built here. */
    destructor plain_subclass_dealloc;
} accel_state;

static inline accel_state *
get_state(PyObject *module)
{
    return (accel_state *)PyModule_GetState(module);
}

static int
record_class_ok(accel_state *st, PyTypeObject *t)
{
    return t->tp_base == &PyTuple_Type && t->tp_dealloc == st->plain_subclass_dealloc
           && t->tp_basicsize == PyTuple_Type.tp_basicsize
           && t->tp_itemsize == PyTuple_Type.tp_itemsize && t->tp_dictoffset == 0
           && t->tp_weaklistoffset == 0;
}

/* decode_records(buf, count, base_offset, base_ts, cls, prefix, suffix) -> list
 *
 * Every record of an uncompressed v2 records section, each as
 * cls(*prefix, offset, timestamp, 0, key, value, headers, *suffix). The Python
 * reference is aiokproto.records.decode.decode_records. */
static PyObject *
decode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "decode_records takes 7 arguments");
        return NULL;
    }
    PyObject *bufobj = args[0];
    if (!PyBytes_Check(bufobj)) {
        PyErr_SetString(PyExc_TypeError, "decode_records: buf must be bytes");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    long long base_offset = PyLong_AsLongLong(args[2]);
    if (base_offset == -1 && PyErr_Occurred())
        return NULL;
    long long base_ts = PyLong_AsLongLong(args[3]);
    if (base_ts == -1 && PyErr_Occurred())
        return NULL;
    if (!PyType_Check(args[4])
        || !record_class_ok(get_state(module), (PyTypeObject *)args[4])) {
        PyErr_SetString(PyExc_TypeError, "decode_records: cls must be a NamedTuple class");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[4];
    if (!PyTuple_CheckExact(args[5]) || !PyTuple_CheckExact(args[6])) {
        PyErr_SetString(PyExc_TypeError, "decode_records: prefix and suffix are tuples");
        return NULL;
    }
    PyObject *prefix = args[5], *suffix = args[6];
    Py_ssize_t np = PyTuple_GET_SIZE(prefix), ns = PyTuple_GET_SIZE(suffix);
    Py_ssize_t width = np + 6 + ns;
    /* A record holds ints, bytes, None, str and headers (tuples of those, untracked
     * below), so it cannot be part of a reference cycle; it is taken off the cyclic
     * collector's lists when prefix and suffix hold no container either. The
     * collector untracks such plain tuples itself on its first pass, but never tuple
     * subclasses: without this every record was walked by each collection while it
     * lived (a third of the Spark source's CPU per row). Any object the collector
     * knows counts as a container, tracked or not: an empty dict is untracked until a
     * container is put in it, and an untracked record in its cycle would never be freed. */
    int untrack = 1;
    for (Py_ssize_t j = 0; j < np; j++)
        if (PyObject_IS_GC(PyTuple_GET_ITEM(prefix, j)))
            untrack = 0;
    for (Py_ssize_t j = 0; j < ns; j++)
        if (PyObject_IS_GC(PyTuple_GET_ITEM(suffix, j)))
            untrack = 0;

    const uint8_t *buf = (const uint8_t *)PyBytes_AS_STRING(bufobj);
    Py_ssize_t end = PyBytes_GET_SIZE(bufobj);
    /* the caller checked count * 7 <= len(buf); a negative or huge count fails here */
    if (count < 0 || count > end) {
        PyErr_Format(PyExc_ValueError, "impossible record count %zd for %zd bytes", count,
                     end);
        return NULL;
    }
    PyObject *out = PyList_New(count);
    if (out == NULL)
        return NULL;
    PyObject *zero = PyLong_FromLong(0);
    PyObject *empty = PyTuple_New(0);
    if (zero == NULL || empty == NULL)
        goto fail_early;
    /* the records cannot be garbage while they are built: the cyclic collector would
     * walk every tuple made so far on each of its runs (see decode_v2) */
    int gc_was_enabled = PyGC_Disable();

    Py_ssize_t pos = 0;
    Py_ssize_t i;
    for (i = 0; i < count; i++) {
        int64_t length, td, od, kl, vl;
        PyObject *key = NULL, *value = NULL, *headers = NULL, *offset = NULL, *ts = NULL;
        if (read_varint(buf, &pos, end, &length) < 0)
            goto fail;
        Py_ssize_t rend = pos + (Py_ssize_t)length;
        if (pos >= end) { /* the attributes byte (unused) */
            PyErr_Format(PyExc_ValueError, "record %zd is truncated", i);
            goto fail;
        }
        pos += 1;
        if (read_varlong(buf, &pos, end, &td) < 0 || read_varint(buf, &pos, end, &od) < 0)
            goto fail;
        /* null is the one-byte -1 only: a longer encoding of -1 is an error, as in
         * the Python loop */
        if (pos < end && buf[pos] == 1) {
            key = Py_NewRef(Py_None);
            pos += 1;
        } else if (read_varint(buf, &pos, end, &kl) < 0) {
            goto fail;
        } else if (kl < 0) {
            PyErr_Format(PyExc_ValueError, "record %zd has key length %lld", i, (long long)kl);
            goto fail;
        } else {
            if ((key = slice_or_fail(buf, pos, kl, end, i, "key")) == NULL)
                goto fail;
            pos += (Py_ssize_t)kl;
        }
        if (pos < end && buf[pos] == 1) {
            value = Py_NewRef(Py_None);
            pos += 1;
        } else if (read_varint(buf, &pos, end, &vl) < 0) {
            goto fail_rec;
        } else if (vl < 0) {
            PyErr_Format(PyExc_ValueError, "record %zd has value length %lld", i,
                         (long long)vl);
            goto fail_rec;
        } else {
            if ((value = slice_or_fail(buf, pos, vl, end, i, "value")) == NULL)
                goto fail_rec;
            pos += (Py_ssize_t)vl;
        }
        if (pos >= end) {
            PyErr_Format(PyExc_ValueError, "record %zd is truncated", i);
            goto fail_rec;
        }
        if (buf[pos] == 0) {
            headers = Py_NewRef(empty);
            pos += 1;
        } else if ((headers = decode_headers(buf, &pos, end, i)) == NULL) {
            goto fail_rec;
        }
        if (pos != rend) {
            PyErr_Format(PyExc_ValueError, "record %zd does not end where its length says", i);
            goto fail_rec;
        }
        if ((offset = add_exact(base_offset, od)) == NULL
            || (ts = add_exact(base_ts, td)) == NULL)
            goto fail_rec;
        PyObject *rec;
#if FAST_SUBTUPLE
        rec = cls->tp_alloc(cls, width);
        if (rec == NULL)
            goto fail_rec;
        {
            PyObject **items = ((PyTupleObject *)rec)->ob_item;
#else
        PyObject *plain = PyTuple_New(width);
        if (plain == NULL)
            goto fail_rec;
        {
            PyObject **items = ((PyTupleObject *)plain)->ob_item;
#endif
            Py_ssize_t k = 0;
            for (Py_ssize_t j = 0; j < np; j++)
                items[k++] = Py_NewRef(PyTuple_GET_ITEM(prefix, j));
            items[k++] = offset;
            items[k++] = ts;
            items[k++] = Py_NewRef(zero);
            items[k++] = key;
            items[k++] = value;
            items[k++] = headers;
            for (Py_ssize_t j = 0; j < ns; j++)
                items[k++] = Py_NewRef(PyTuple_GET_ITEM(suffix, j));
        }
#if !FAST_SUBTUPLE
        rec = new_record(cls, plain);
        Py_DECREF(plain);
        if (rec == NULL)
            goto fail;
#endif
        if (untrack)
            PyObject_GC_UnTrack(rec);
        PyList_SET_ITEM(out, i, rec);
        continue;
    fail_rec:
        Py_XDECREF(key);
        Py_XDECREF(value);
        Py_XDECREF(headers);
        Py_XDECREF(offset);
        Py_XDECREF(ts);
        goto fail;
    }
    if (gc_was_enabled)
        PyGC_Enable();
    Py_DECREF(zero);
    Py_DECREF(empty);
    if (pos != end) {
        PyErr_Format(PyExc_ValueError, "%zd bytes left after its %zd records", end - pos,
                     count);
        Py_DECREF(out);
        return NULL;
    }
    return out;
fail:
    if (gc_was_enabled)
        PyGC_Enable();
fail_early:
    Py_XDECREF(zero);
    Py_XDECREF(empty);
    Py_DECREF(out); /* unset slots are NULL: list_dealloc skips them */
    return NULL;
}

/* -- encoding ------------------------------------------------------------------------ */

/* a bytes-like argument or None: (data, size, is_null), with the export held (`held`)
 * or a copy of the data owned (`copy`, see unalias); `obj` is the argument (borrowed) */
typedef struct {
    Py_buffer view;
    PyObject *obj;
    PyObject *copy;
    int held;
    int null;
} field_t;

/* bytes (or a subclass), bytearray or None, read in place: no Python code runs, so
 * nothing can change the lists during a loop over many records, and the only buffer
 * resized in it is the batch's (which unalias copies first when it is the field) */
static int
get_plain_field(PyObject *obj, field_t *f, const char *what)
{
    f->held = 0;
    f->obj = obj;
    f->copy = NULL;
    f->null = obj == Py_None;
    if (f->null)
        return 0;
    if (PyBytes_Check(obj)) {
        f->view.buf = PyBytes_AS_STRING(obj);
        f->view.len = PyBytes_GET_SIZE(obj);
    } else if (PyByteArray_Check(obj)) {
        f->view.buf = PyByteArray_AS_STRING(obj);
        f->view.len = PyByteArray_GET_SIZE(obj);
    } else {
        PyErr_Format(PyExc_TypeError, "record %s must be bytes, bytearray or None, not %.100s",
                     what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

static int
get_field(PyObject *obj, field_t *f, const char *what)
{
    f->held = 0;
    f->obj = obj;
    f->copy = NULL;
    f->null = obj == Py_None;
    if (f->null)
        return 0;
    if (PyObject_GetBuffer(obj, &f->view, PyBUF_SIMPLE) < 0) {
        /* (PyBUF_SIMPLE: C-contiguous, its size in bytes whatever the item format) */
        if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_BufferError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "record %s must be bytes, a contiguous bytes-like "
                         "object or None, not %.100s", what, Py_TYPE(obj)->tp_name);
        }
        return -1;
    }
    f->held = 1;
    return 0;
}

static void
release_field(field_t *f)
{
    if (f->held)
        PyBuffer_Release(&f->view);
    f->held = 0;
    Py_CLEAR(f->copy);
}

/* A field that is the batch buffer itself (a built, uncompressed batch is that buffer,
 * and may be appended to its own builder) is copied before the buffer grows: the resize
 * may move its storage, and the field would be read from freed memory (review: a
 * use-after-free, stale heap bytes in the batch). An export of `buf` held for the field
 * is released with it, or the resize would be refused. No Python code runs here. */
static int
unalias(PyObject *buf, field_t *f)
{
    if (f->null || f->obj != buf || f->copy != NULL)
        return 0;
    PyObject *copy = PyBytes_FromStringAndSize(f->view.buf, f->view.len);
    if (copy == NULL)
        return -1;
    if (f->held)
        PyBuffer_Release(&f->view);
    f->held = 0;
    f->copy = copy;
    f->view.buf = PyBytes_AS_STRING(copy);
    f->view.len = PyBytes_GET_SIZE(copy);
    return 0;
}

/* A batch holds at most INT32_MAX records (recordCount and lastOffsetDelta are int32):
 * record_count (the offset delta of the next record) is refused outside 0..INT32_MAX,
 * and at INT32_MAX the batch is full. The record count is a writable field; without
 * this a huge one overflowed (undefined behaviour) and wrote a wrong offset delta. */
static void
set_illegal_state(long long count)
{
    PyObject *mod = PyImport_ImportModule("aiokproto.error_families");
    if (mod == NULL)
        return;
    PyObject *cls = PyObject_GetAttrString(mod, "IllegalStateError");
    Py_DECREF(mod);
    if (cls == NULL)
        return;
    PyErr_Format(cls, "record batch builder holds an impossible record count %lld "
                      "(a batch holds 0 to 2**31-1 records)", count);
    Py_DECREF(cls);
}

/* One record appended to bytearray `buf` unless it would pass `limit` (the first record
 * of a batch, offset delta 0, always goes in). Returns 1 appended, 0 full, -1 error. */
static int
append_one(PyObject *buf, int64_t od, int64_t td, field_t *k, field_t *v, field_t *h,
           Py_ssize_t limit)
{
    if (unalias(buf, k) < 0 || unalias(buf, v) < 0 || unalias(buf, h) < 0)
        return -1;
    Py_ssize_t klen = k->null ? 0 : k->view.len;
    Py_ssize_t vlen = v->null ? 0 : v->view.len;
    Py_ssize_t hlen = h->null ? 1 : h->view.len;
    uint64_t tdz = zz64(td), odz = zz32(od);
    uint64_t klz = k->null ? 1 : zz32(klen), vlz = v->null ? 1 : zz32(vlen);
    Py_ssize_t body = 1 + uvarint_size(tdz) + uvarint_size(odz) + uvarint_size(klz) + klen
                      + uvarint_size(vlz) + vlen + hlen;
    Py_ssize_t total = uvarint_size(zz32(body)) + body;
    Py_ssize_t at = PyByteArray_GET_SIZE(buf);
    if (od != 0 && at + total > limit)
        return 0;
    if (at + total >= ((PyByteArrayObject *)buf)->ob_alloc) {
        /* Grow by half (at most to the batch's limit): bytearray grows by an eighth,
         * or to the exact size for a big record, and a realloc that cannot extend in
         * place copies the whole batch: 100 KB records in a 1 MB batch were copied
         * five times over. The batch still holds only what its records need (1.5x at
         * most), never its limit up front. Shrinking back to the size is in place. */
        Py_ssize_t grown = (at + total) + (at + total) / 2;
        if (grown > limit)
            grown = limit > at + total ? limit : at + total;
        if (grown > at + total && PyByteArray_Resize(buf, grown) < 0)
            return -1;
    }
    if (PyByteArray_Resize(buf, at + total) < 0)
        return -1;
    uint8_t *p = (uint8_t *)PyByteArray_AS_STRING(buf) + at;
    p += write_uvarint(p, zz32(body));
    *p++ = 0; /* attributes */
    p += write_uvarint(p, tdz);
    p += write_uvarint(p, odz);
    p += write_uvarint(p, klz);
    if (klen) {
        memcpy(p, k->view.buf, klen);
        p += klen;
    }
    p += write_uvarint(p, vlz);
    if (vlen) {
        memcpy(p, v->view.buf, vlen);
        p += vlen;
    }
    if (h->null)
        *p++ = 0; /* no headers */
    else
        memcpy(p, h->view.buf, hlen);
    return 1;
}

static int
as_int64(PyObject *o, int64_t *out)
{
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

/* The timestamp delta as int64: 1; 0 when it does not fit and the record is not the
 * batch's first (it then starts a new batch, where the delta is 0); -1 error. Python's
 * _append_python does the same. */
static int
delta_fits(PyObject *o, int64_t od, int64_t *out)
{
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow) {
        if (od == 0) {
            PyErr_SetString(PyExc_OverflowError, "timestamp delta of a first record");
            return -1;
        }
        return 0;
    }
    *out = v;
    return 1;
}

/* append_records(buf, first_delta, timestamp_delta, keys, values, start, stop, headers,
 *                limit) -> int
 * Appends values[start:stop] (keys[i] with each, or no keys when keys is None) as long
 * as they fit; returns how many went in (at least one when first_delta is 0). */
static PyObject *
append_records(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "append_records takes 9 arguments");
        return NULL;
    }
    PyObject *buf = args[0], *keys = args[3], *values = args[4];
    if (!PyByteArray_CheckExact(buf)) {
        PyErr_SetString(PyExc_TypeError, "append_records: buf must be a bytearray");
        return NULL;
    }
    if (!PyList_CheckExact(values) || (keys != Py_None && !PyList_CheckExact(keys))) {
        PyErr_SetString(PyExc_TypeError, "append_records: values and keys must be lists");
        return NULL;
    }
    int64_t od, td;
    Py_ssize_t start, stop, limit;
    if (as_int64(args[1], &od) < 0)
        return NULL;
    if (od < 0 || od > INT32_MAX) {
        set_illegal_state(od);
        return NULL;
    }
    if (od == INT32_MAX)
        return PyLong_FromLong(0);
    int fits = delta_fits(args[2], od, &td);
    if (fits <= 0)
        return fits < 0 ? NULL : PyLong_FromLong(0);
    if ((start = PyLong_AsSsize_t(args[5])) == -1 && PyErr_Occurred())
        return NULL;
    if ((stop = PyLong_AsSsize_t(args[6])) == -1 && PyErr_Occurred())
        return NULL;
    if ((limit = PyLong_AsSsize_t(args[8])) == -1 && PyErr_Occurred())
        return NULL;
    if (start < 0 || stop > PyList_GET_SIZE(values)
        || (keys != Py_None && stop > PyList_GET_SIZE(keys))) {
        PyErr_SetString(PyExc_IndexError, "append_records: range outside the lists");
        return NULL;
    }
    field_t h;
    if (get_field(args[7], &h, "headers") < 0)
        return NULL;
    /* all or what fitted: a value refused midway takes back the records of this call,
     * which the builder has not counted */
    Py_ssize_t initial = PyByteArray_GET_SIZE(buf);
    Py_ssize_t done = 0;
    for (Py_ssize_t i = start; i < stop && od + done < INT32_MAX; i++) {
        field_t k = {.null = 1}, v = {.null = 1};
        int r = -1;
        /* read in place (get_plain_field): the lists cannot change under the loop */
        if (get_plain_field(keys == Py_None ? Py_None : PyList_GET_ITEM(keys, i), &k, "key")
                == 0
            && get_plain_field(PyList_GET_ITEM(values, i), &v, "value") == 0)
            r = append_one(buf, od + done, td, &k, &v, &h, limit);
        release_field(&k);
        release_field(&v);
        if (r < 0) {
            release_field(&h);
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            /* nothing holds an export of buf (no Python code ran), so this shrink
             * cannot fail; checked all the same */
            if (PyByteArray_Resize(buf, initial) < 0) {
                Py_XDECREF(type);
                Py_XDECREF(value);
                Py_XDECREF(tb);
                return NULL;
            }
            PyErr_Restore(type, value, tb);
            return NULL;
        }
        if (r == 0)
            break;
        done++;
    }
    release_field(&h);
    return PyLong_FromSsize_t(done);
}

/* -- the producer's per-record state ------------------------------------------------ */

/* RecordsBuilder: the fields RecordBatchBuilder appends to (records/batch_v2.py keeps
 * the Python base class with the same names, the reference for this one), so append()
 * is one C call. */
typedef struct {
    PyObject_HEAD
    PyObject *buf;     /* bytearray: batch header space, then the records */
    PyObject *payload; /* compressed records kept for rebuilds, or NULL */
    Py_ssize_t count;
    long long base_ts;
    long long max_ts;
    Py_ssize_t limit;
} BuilderObject;

static int
builder_traverse(BuilderObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->buf);
    Py_VISIT(self->payload);
    return 0;
}

static int
builder_clear(BuilderObject *self)
{
    Py_CLEAR(self->buf);
    Py_CLEAR(self->payload);
    return 0;
}

static void
builder_dealloc(BuilderObject *self)
{
    PyObject_GC_UnTrack(self);
    builder_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *str_encode_headers;

/* One record onto the builder (RecordBatchBuilder.append): 1 with its offset delta and
 * timestamp in *delta and *ts, 0 when it does not fit, -1 with an exception set. A delta
 * no varlong holds also gives 0: the record starts a batch of its own, where a timestamp
 * outside int64 is an OverflowError. Python code can run before the record is written
 * (the timestamp's __index__, the headers' encoding, a 3.12+ __buffer__ of key or value)
 * and change the builder: its fields are read only after all of it. */
static int
builder_append_impl(BuilderObject *self, PyObject *ts_obj, PyObject *key, PyObject *value,
                    PyObject *headers, Py_ssize_t *delta, long long *ts_out)
{
    /* an int (as Python's reference): not a float, nor an object with __index__ */
    if (!PyLong_Check(ts_obj)) {
        PyErr_Format(PyExc_TypeError, "record timestamp must be an int, not %.100s",
                     Py_TYPE(ts_obj)->tp_name);
        return -1;
    }
    int overflow;
    long long ts = PyLong_AsLongLongAndOverflow(ts_obj, &overflow);
    if (ts == -1 && PyErr_Occurred())
        return -1;
    if (overflow) {
        if (self->count)
            return 0;
        PyErr_SetString(PyExc_OverflowError, "record timestamp outside the int64 range");
        return -1;
    }
    PyObject *encoded = NULL;
    if (headers != Py_None) {
        int truth = PyObject_IsTrue(headers);
        if (truth < 0)
            return -1;
        if (truth) {
            /* one argument, whatever it is (a tuple of headers too) */
            encoded = PyObject_CallMethodOneArg((PyObject *)self, str_encode_headers, headers);
            if (encoded == NULL)
                return -1;
        }
    }
    field_t k, v, h;
    int r = -1;
    Py_ssize_t n = 0;
    if (get_field(key, &k, "key") < 0)
        goto done;
    if (get_field(value, &v, "value") < 0) {
        release_field(&k);
        goto done;
    }
    if (get_field(encoded == NULL ? Py_None : encoded, &h, "headers") < 0) {
        release_field(&k);
        release_field(&v);
        goto done;
    }
    /* no Python code runs from here on */
    n = self->count;
    long long base = self->base_ts;
    int bad_count = 0;
    if (self->buf == NULL || !PyByteArray_CheckExact(self->buf)) {
        PyErr_SetString(PyExc_TypeError, "builder buffer must be a bytearray");
        r = -1;
    }
    else if (n < 0 || n > INT32_MAX) {
        bad_count = 1;
        r = -1;
    }
    else if (n == INT32_MAX
             || (n && ((base < 0 && ts > LLONG_MAX + base) || (base > 0 && ts < LLONG_MIN + base))))
        r = 0;
    else
        r = append_one(self->buf, n, n ? ts - base : 0, &k, &v, &h, self->limit);
    release_field(&k);
    release_field(&v);
    release_field(&h);
    if (bad_count)
        set_illegal_state(n); /* imports: Python code, after the fields are let go */
done:
    Py_XDECREF(encoded);
    if (r <= 0)
        return r;
    if (n == 0)
        self->base_ts = self->max_ts = ts;
    else if (ts > self->max_ts)
        self->max_ts = ts;
    self->count = n + 1;
    Py_CLEAR(self->payload);
    *delta = n;
    *ts_out = ts;
    return 1;
}

/* append(timestamp_ms, key, value, headers=None) -> offset delta, or None when full
 * (the arguments by position or by name, as Python's) */
static PyObject *
builder_append(BuilderObject *self, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    static const char *const names[] = {"timestamp_ms", "key", "value", "headers"};
    PyObject *a[4] = {NULL, NULL, NULL, Py_None};
    if (nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "append takes 3 or 4 arguments");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        a[i] = args[i];
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t j = 0; j < nkw; j++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, j);
        int i = 0;
        while (i < 4 && PyUnicode_CompareWithASCIIString(name, names[i]) != 0)
            i++;
        if (i == 4) {
            PyErr_Format(PyExc_TypeError, "append() got an unexpected keyword argument '%U'",
                         name);
            return NULL;
        }
        if (i < nargs) {
            PyErr_Format(PyExc_TypeError, "append() got multiple values for argument '%s'",
                         names[i]);
            return NULL;
        }
        a[i] = args[nargs + j];
    }
    if (a[0] == NULL || a[1] == NULL || a[2] == NULL) {
        PyErr_SetString(PyExc_TypeError, "append takes 3 or 4 arguments");
        return NULL;
    }
    Py_ssize_t delta;
    long long ts;
    int r = builder_append_impl(self, a[0], a[1], a[2], a[3], &delta, &ts);
    if (r < 0)
        return NULL;
    if (r == 0)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(delta);
}

static PyMethodDef builder_methods[] = {
    {"append", (PyCFunction)(void (*)(void))builder_append, METH_FASTCALL | METH_KEYWORDS,
     "Append a record; return its offset delta, or None if the batch is full."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef builder_members[] = {
    {"_buf", T_OBJECT_EX, offsetof(BuilderObject, buf), 0, NULL},
    {"_payload", T_OBJECT, offsetof(BuilderObject, payload), 0, NULL},
    {"_count", T_PYSSIZET, offsetof(BuilderObject, count), 0, NULL},
    {"_base_ts", T_LONGLONG, offsetof(BuilderObject, base_ts), 0, NULL},
    {"_max_ts", T_LONGLONG, offsetof(BuilderObject, max_ts), 0, NULL},
    {"_limit", T_PYSSIZET, offsetof(BuilderObject, limit), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aiokproto._accel.RecordsBuilder",
    .tp_basicsize = sizeof(BuilderObject),
    .tp_dealloc = (destructor)builder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The appendable state of a record batch builder.",
    .tp_traverse = (traverseproc)builder_traverse,
    .tp_clear = (inquiry)builder_clear,
    .tp_methods = builder_methods,
    .tp_members = builder_members,
    .tp_new = PyType_GenericNew,
};

/* DeliveryHandle: the fields of producer/delivery.py's DeliveryFuture, whose Python
 * base class of the same names is the reference. One is made per send(): in C it costs
 * an allocation, not a Python __init__. */
typedef struct {
    PyObject_HEAD
    PyObject *batch;
    PyObject *error;
    Py_ssize_t delta;
    long long timestamp;
    Py_ssize_t ksize;
    Py_ssize_t vsize;
} HandleObject;

static int
handle_traverse(HandleObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->batch);
    Py_VISIT(self->error);
    return 0;
}

static int
handle_clear(HandleObject *self)
{
    Py_CLEAR(self->batch);
    Py_CLEAR(self->error);
    return 0;
}

static void
handle_dealloc(HandleObject *self)
{
    PyObject_GC_UnTrack(self);
    handle_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
as_ssize(PyObject *o, Py_ssize_t *out)
{
    Py_ssize_t v = PyLong_AsSsize_t(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

/* DeliveryFuture(batch, delta, timestamp, ksize, vsize, error=None) */
static PyObject *
handle_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *batch, *delta, *timestamp, *ksize, *vsize, *error = Py_None;
    static char *names[] = {"batch", "delta", "timestamp", "ksize", "vsize", "error", NULL};
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (kwds == NULL && (nargs == 5 || nargs == 6)) {
        batch = PyTuple_GET_ITEM(args, 0);
        delta = PyTuple_GET_ITEM(args, 1);
        timestamp = PyTuple_GET_ITEM(args, 2);
        ksize = PyTuple_GET_ITEM(args, 3);
        vsize = PyTuple_GET_ITEM(args, 4);
        if (nargs == 6)
            error = PyTuple_GET_ITEM(args, 5);
    }
    else if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOO|O:DeliveryFuture", names, &batch,
                                          &delta, &timestamp, &ksize, &vsize, &error))
        return NULL;
    HandleObject *self = (HandleObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    int64_t ts;
    if (as_ssize(delta, &self->delta) < 0 || as_int64(timestamp, &ts) < 0
        || as_ssize(ksize, &self->ksize) < 0 || as_ssize(vsize, &self->vsize) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->timestamp = ts;
    self->batch = batch == Py_None ? NULL : Py_NewRef(batch);
    self->error = error == Py_None ? NULL : Py_NewRef(error);
    return (PyObject *)self;
}

static PyTypeObject HandleType;
static PyObject *str_future, *str_done, *str_exception, *str_callbacks, *str_add_slow;

/* done() (DeliveryFuture.done) */
static PyObject *
handle_done(HandleObject *self, PyObject *Py_UNUSED(unused))
{
    if (self->batch == NULL)
        Py_RETURN_TRUE;
    PyObject *future = PyObject_GetAttr(self->batch, str_future);
    if (future == NULL)
        return NULL;
    PyObject *r = PyObject_CallMethodNoArgs(future, str_done);
    Py_DECREF(future);
    return r;
}

/* exception() (DeliveryFuture.exception) */
static PyObject *
handle_exception(HandleObject *self, PyObject *Py_UNUSED(unused))
{
    if (self->batch == NULL)
        return Py_NewRef(self->error == NULL ? Py_None : self->error);
    PyObject *future = PyObject_GetAttr(self->batch, str_future);
    if (future == NULL)
        return NULL;
    PyObject *r = PyObject_CallMethodNoArgs(future, str_exception);
    Py_DECREF(future);
    return r;
}

/* add_done_callback(callback): while the batch's list of record callbacks is there
 * (made by the first call, taken away when they run), the callback and the record's
 * fields go onto it; otherwise _add_callback_slow (DeliveryFuture's Python) decides. */
static PyObject *
handle_add_done_callback(HandleObject *self, PyObject *callback)
{
    if (self->batch != NULL) {
        PyObject *calls = PyObject_GetAttr(self->batch, str_callbacks);
        if (calls == NULL)
            return NULL;
        if (PyList_CheckExact(calls)) {
            PyObject *item[4] = {
                PyLong_FromSsize_t(self->delta), PyLong_FromLongLong(self->timestamp),
                PyLong_FromSsize_t(self->ksize), PyLong_FromSsize_t(self->vsize)};
            int bad = item[0] == NULL || item[1] == NULL || item[2] == NULL || item[3] == NULL
                      || PyList_Append(calls, callback) < 0;
            for (int i = 0; i < 4; i++) {
                if (!bad && PyList_Append(calls, item[i]) < 0)
                    bad = 1;
                Py_XDECREF(item[i]);
            }
            Py_DECREF(calls);
            if (bad)
                return NULL;
            Py_RETURN_NONE;
        }
        Py_DECREF(calls);
    }
    return PyObject_CallMethodOneArg((PyObject *)self, str_add_slow, callback);
}

static PyMethodDef handle_methods[] = {
    {"done", (PyCFunction)handle_done, METH_NOARGS, NULL},
    {"exception", (PyCFunction)handle_exception, METH_NOARGS, NULL},
    {"add_done_callback", (PyCFunction)handle_add_done_callback, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

/* run_record_callbacks(handle_type, batch, calls, report) -> None
 * (delivery.py's _run_record_callbacks: calls holds runs of (callback, delta,
 * timestamp, ksize, vsize); each callback gets a handle for its record, and an
 * Exception from one goes to report(exception) at once and does not keep the others
 * from running; any other BaseException stops the loop and propagates). */
static PyObject *
run_record_callbacks(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyType_Check(args[0])
        || !PyType_IsSubtype((PyTypeObject *)args[0], &HandleType) || !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "run_record_callbacks(handle_type, batch, calls: list, report)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *batch = args[1], *calls = args[2], *report = args[3];
    /* the list is read as it is now at each step (a callback may change it), and each
     * run's items are held before any is converted (an __index__ may change it too) */
    for (Py_ssize_t i = 0; i + 4 < PyList_GET_SIZE(calls); i += 5) {
        PyObject *item[5];
        for (int j = 0; j < 5; j++)
            item[j] = Py_NewRef(PyList_GET_ITEM(calls, i + j));
        HandleObject *h = (HandleObject *)type->tp_alloc(type, 0);
        int64_t ts;
        int bad = h == NULL || as_ssize(item[1], &h->delta) < 0 || as_int64(item[2], &ts) < 0
                  || as_ssize(item[3], &h->ksize) < 0 || as_ssize(item[4], &h->vsize) < 0;
        PyObject *r = NULL;
        if (!bad) {
            h->timestamp = ts;
            h->batch = Py_NewRef(batch);
            r = PyObject_CallOneArg(item[0], (PyObject *)h);
        }
        Py_XDECREF(h);
        for (int j = 0; j < 5; j++)
            Py_DECREF(item[j]);
        if (bad)
            return NULL;
        if (r != NULL) {
            Py_DECREF(r);
            continue;
        }
        /* as asyncio runs a callback: SystemExit and KeyboardInterrupt end the run (and
         * the loop); any other exception is reported and the next callback runs (a
         * CancelledError from one must not leave the others' awaiting tasks asleep) */
        if (PyErr_ExceptionMatches(PyExc_SystemExit)
            || PyErr_ExceptionMatches(PyExc_KeyboardInterrupt))
            return NULL;
#if PY_VERSION_HEX >= 0x030C0000
        PyObject *value = PyErr_GetRaisedException();
#else
        PyObject *type_, *value, *tb;
        PyErr_Fetch(&type_, &value, &tb);
        PyErr_NormalizeException(&type_, &value, &tb);
        if (tb != NULL && value != NULL)
            PyException_SetTraceback(value, tb);
        Py_XDECREF(type_);
        Py_XDECREF(tb);
#endif
        if (value == NULL) /* cannot happen: an exception was set */
            continue;
        r = PyObject_CallOneArg(report, value);
        Py_DECREF(value);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
    }
    Py_RETURN_NONE;
}

static PyObject *str_builder;

/* append_to(handle_type, batch, timestamp, key, value, headers, ksize, vsize) -> handle or
 * None (delivery.py's append_to: the record onto batch.builder, and its handle) */
static PyObject *
append_to(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8 || !PyType_Check(args[0])
        || !PyType_IsSubtype((PyTypeObject *)args[0], &HandleType)) {
        PyErr_SetString(PyExc_TypeError, "append_to(handle_type, batch, timestamp, key, "
                                         "value, headers, ksize, vsize)");
        return NULL;
    }
    Py_ssize_t ksize, vsize, delta;
    long long ts;
    if (as_ssize(args[6], &ksize) < 0 || as_ssize(args[7], &vsize) < 0)
        return NULL;
    PyObject *builder = PyObject_GetAttr(args[1], str_builder);
    if (builder == NULL)
        return NULL;
    if (!PyObject_TypeCheck(builder, &BuilderType)) {
        Py_DECREF(builder);
        PyErr_SetString(PyExc_TypeError, "append_to: batch.builder is not a RecordsBuilder");
        return NULL;
    }
    int r = builder_append_impl((BuilderObject *)builder, args[2], args[3], args[4], args[5],
                                &delta, &ts);
    Py_DECREF(builder);
    if (r < 0)
        return NULL;
    if (r == 0)
        Py_RETURN_NONE;
    PyTypeObject *type = (PyTypeObject *)args[0];
    HandleObject *h = (HandleObject *)type->tp_alloc(type, 0);
    if (h == NULL)
        return NULL;
    h->batch = Py_NewRef(args[1]);
    h->delta = delta;
    h->timestamp = ts;
    h->ksize = ksize;
    h->vsize = vsize;
    return (PyObject *)h;
}

static PyMemberDef handle_members[] = {
    {"_batch", T_OBJECT, offsetof(HandleObject, batch), 0, NULL},
    {"_error", T_OBJECT, offsetof(HandleObject, error), 0, NULL},
    {"_delta", T_PYSSIZET, offsetof(HandleObject, delta), 0, NULL},
    {"_timestamp", T_LONGLONG, offsetof(HandleObject, timestamp), 0, NULL},
    {"_ksize", T_PYSSIZET, offsetof(HandleObject, ksize), 0, NULL},
    {"_vsize", T_PYSSIZET, offsetof(HandleObject, vsize), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject HandleType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aiokproto._accel.DeliveryHandle",
    .tp_basicsize = sizeof(HandleObject),
    .tp_dealloc = (destructor)handle_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The fields of one record's delivery handle.",
    .tp_traverse = (traverseproc)handle_traverse,
    .tp_clear = (inquiry)handle_clear,
    .tp_members = handle_members,
    .tp_methods = handle_methods,
    .tp_new = handle_new,
};

/* now_ms() -> int: wall-clock milliseconds, int(time.time() * 1000) */
static PyObject *
now_ms(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused))
{
    struct timespec t;
    if (timespec_get(&t, TIME_UTC) != TIME_UTC) {
        PyErr_SetString(PyExc_OSError, "timespec_get failed");
        return NULL;
    }
    return PyLong_FromLongLong((long long)t.tv_sec * 1000 + t.tv_nsec / 1000000);
}

/* -- murmur2 ------------------------------------------------------------------------- */

static uint32_t
murmur2_hash(const uint8_t *data, Py_ssize_t n)
{
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)n;
    Py_ssize_t words = n >> 2;
    for (Py_ssize_t i = 0; i < words; i++) {
        const uint8_t *p = data + 4 * i;
        uint32_t k = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
                     | (uint32_t)p[3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    Py_ssize_t base = words * 4;
    switch (n & 3) {
    case 3:
        h ^= (uint32_t)data[base + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[base + 1] << 8;
        /* fall through */
    case 1:
        h ^= data[base];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* murmur2(data) -> int (aiokproto.producer.partitioner.murmur2) */
static PyObject *
murmur2(PyObject *Py_UNUSED(self), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        /* the Python reference's TypeError, for a non-contiguous buffer too */
        if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_BufferError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "murmur2 needs bytes or a contiguous bytes-like object, not %.100s",
                         Py_TYPE(arg)->tp_name);
        }
        return NULL;
    }
    uint32_t h = murmur2_hash((const uint8_t *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(h);
}

/* -- send()'s common case -------------------------------------------------------------- */

/* Producer.send() for a record that needs nothing but buffering (the Python body of
 * send() in aiokproto/producer/producer.py is the reference): the producer's, topic's,
 * accumulator's, queue's and batch's state is read and written at the offsets of their
 * classes' __slots__ member descriptors, as the interpreter's own slot loads do, so the
 * call costs no attribute lookups. bind_send() takes the classes once; an object of
 * another class, or any state off the common path, gives None and send() takes its
 * Python path. Nothing is changed before the record is in its batch. */

enum {
    SF_YIELD_NEXT, SF_PLAIN, SF_PARTITIONER, SF_MAX_CHARGE, SF_TOPICS, SF_ACC, SF_RESERVED,
    SF_SPACE_QUEUE, SF_STICKY, SF_STICKY_QUEUE, SF_QUEUES, SF_COUNT, SF_LEFT, SF_USED,
    SF_LIMIT, SF_TXN_ADDED, SF_OPEN, SF_CHARGE, SF_BUILDER, SF_N
};

/* which of bind_send's classes holds each slot, and its name */
static const struct {
    int cls;
    const char *name;
} sf_names[SF_N] = {
    {0, "_yield_next"}, {0, "_plain"}, {0, "_partitioner"}, {0, "_max_charge"},
    {0, "_topics"}, {0, "_acc"}, {0, "_reserved"}, {0, "_space_queue"},
    {1, "sticky"}, {1, "sticky_queue"}, {1, "queues"}, {1, "count"},
    {2, "left"}, {3, "used"}, {3, "limit"}, {4, "txn_added"}, {4, "open"},
    {5, "charge"}, {5, "builder"},
};

static PyTypeObject *sf_types[6]; /* Producer, _TopicState, StickyPartitioner,
                                   * Accumulator, PartitionQueue, ProducerBatch */
static Py_ssize_t sf_offsets[SF_N];
static PyTypeObject *sf_handle_type, *sf_deque_type;
static Py_ssize_t sf_record_charge;

#define SF_SLOT(obj, i) (*(PyObject **)((char *)(obj) + sf_offsets[i]))
#define SF_IS(obj, cls) ((obj) != NULL && PyObject_TypeCheck((obj), sf_types[cls]))

/* bind_send(producer, topic_state, sticky, accumulator, queue, batch, handle_type,
 * record_charge): the classes send_fast reads */
static PyObject *
bind_send(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "bind_send takes 8 arguments");
        return NULL;
    }
    for (int i = 0; i < 7; i++)
        if (!PyType_Check(args[i])) {
            PyErr_SetString(PyExc_TypeError, "bind_send: the first 7 arguments are classes");
            return NULL;
        }
    if (!PyType_IsSubtype((PyTypeObject *)args[6], &HandleType)) {
        PyErr_SetString(PyExc_TypeError, "bind_send: handle_type is not a DeliveryHandle");
        return NULL;
    }
    Py_ssize_t charge = PyLong_AsSsize_t(args[7]);
    if (charge == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t offsets[SF_N];
    for (int i = 0; i < SF_N; i++) {
        PyObject *cls = args[sf_names[i].cls];
        PyObject *d = PyObject_GetAttrString(cls, sf_names[i].name);
        if (d == NULL)
            return NULL;
        PyMemberDef *m = Py_IS_TYPE(d, &PyMemberDescr_Type) ? ((PyMemberDescrObject *)d)->d_member
                                                             : NULL;
        /* an offset into the layout of the member's own class: only for it and its
         * subclasses (a descriptor set on an unrelated class would read outside) */
        int ok = m != NULL && m->type == T_OBJECT_EX && !(m->flags & READONLY)
                 && PyType_IsSubtype((PyTypeObject *)cls, PyDescr_TYPE(d));
        if (ok)
            offsets[i] = m->offset;
        Py_DECREF(d);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "bind_send: %s.%s is not a __slots__ member",
                         ((PyTypeObject *)cls)->tp_name, sf_names[i].name);
            return NULL;
        }
    }
    PyObject *collections = PyImport_ImportModule("collections");
    if (collections == NULL)
        return NULL;
    PyObject *deque = PyObject_GetAttrString(collections, "deque");
    Py_DECREF(collections);
    if (deque == NULL)
        return NULL;
    if (!PyType_Check(deque)) {
        Py_DECREF(deque);
        PyErr_SetString(PyExc_TypeError, "bind_send: collections.deque is not a class");
        return NULL;
    }
    Py_XSETREF(sf_deque_type, (PyTypeObject *)deque);
    for (int i = 0; i < 6; i++)
        Py_XSETREF(sf_types[i], (PyTypeObject *)Py_NewRef(args[i]));
    Py_XSETREF(sf_handle_type, (PyTypeObject *)Py_NewRef(args[6]));
    memcpy(sf_offsets, offsets, sizeof offsets);
    sf_record_charge = charge;
    Py_RETURN_NONE;
}

/* an exact int slot: 1 with its value in *out, 0 if it is anything else */
static int
sf_ssize(PyObject *obj, int i, Py_ssize_t *out)
{
    PyObject *v = SF_SLOT(obj, i);
    if (v == NULL || !PyLong_CheckExact(v))
        return 0;
    *out = PyLong_AsSsize_t(v);
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Clear(); /* an OverflowError: the Python path handles such state */
        return 0;
    }
    return 1;
}

/* send_fast(producer, topic, value, key, timestamp_ms) -> handle, or None: take the
 * Python path */
static PyObject *
send_fast(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "send_fast(producer, topic, value, key, timestamp_ms)");
        return NULL;
    }
    PyObject *p = args[0], *topic = args[1], *value = args[2], *key = args[3], *ts_obj = args[4];
    if (sf_handle_type == NULL || !SF_IS(p, 0) || SF_SLOT(p, SF_YIELD_NEXT) != Py_False
        || SF_SLOT(p, SF_PLAIN) != Py_True || SF_SLOT(p, SF_PARTITIONER) != Py_None
        || !PyUnicode_CheckExact(topic))
        Py_RETURN_NONE;
    Py_ssize_t vsize = -1, ksize = -1;
    if (value != Py_None) {
        if (!PyBytes_CheckExact(value))
            Py_RETURN_NONE;
        vsize = PyBytes_GET_SIZE(value);
    }
    if (key != Py_None) {
        if (!PyBytes_CheckExact(key))
            Py_RETURN_NONE;
        ksize = PyBytes_GET_SIZE(key);
    }
    if (ts_obj != Py_None) {
        if (!PyLong_CheckExact(ts_obj))
            Py_RETURN_NONE;
        int overflow;
        long long t = PyLong_AsLongLongAndOverflow(ts_obj, &overflow);
        if (overflow || t < -1)
            Py_RETURN_NONE;
    }
    Py_ssize_t charge = sf_record_charge + vsize + ksize, max_charge;
    if (!sf_ssize(p, SF_MAX_CHARGE, &max_charge) || charge > max_charge)
        Py_RETURN_NONE;
    PyObject *topics = SF_SLOT(p, SF_TOPICS);
    if (topics == NULL || !PyDict_CheckExact(topics))
        Py_RETURN_NONE;
    /* the lookup may run a hostile key's __eq__: nothing is read from p before it */
    Py_INCREF(topics);
    PyObject *ts = PyDict_GetItemWithError(topics, topic);
    Py_XINCREF(ts);
    Py_DECREF(topics);
    if (ts == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *result = Py_None, *pq = NULL, *sticky = NULL, *acc = NULL, *batch = NULL;
    PyObject *new_left = NULL, *new_held = NULL, *new_used = NULL;
    HandleObject *hd = NULL;
    Py_ssize_t left = 0;
    if (!SF_IS(ts, 1))
        goto fallback;
    /* The handle first: allocating it can run the cyclic GC, and so Python code, which
     * must not find anything changed after a failure, nor change what is read below. */
    hd = (HandleObject *)sf_handle_type->tp_alloc(sf_handle_type, 0);
    if (hd == NULL) {
        result = NULL;
        goto fallback;
    }
    if (key == Py_None) {
        sticky = SF_SLOT(ts, SF_STICKY);
        if (!SF_IS(sticky, 2) || !sf_ssize(sticky, SF_LEFT, &left) || left <= 0) {
            sticky = NULL;
            goto fallback;
        }
        Py_INCREF(sticky);
        pq = Py_XNewRef(SF_SLOT(ts, SF_STICKY_QUEUE));
    }
    else {
        /* the default partitioner: partition_for_key(key, count) */
        Py_ssize_t count;
        PyObject *queues = SF_SLOT(ts, SF_QUEUES);
        if (!sf_ssize(ts, SF_COUNT, &count) || count <= 0 || queues == NULL
            || !PyDict_CheckExact(queues))
            goto fallback;
        uint32_t h = murmur2_hash((const uint8_t *)PyBytes_AS_STRING(key), ksize);
        PyObject *part = PyLong_FromSsize_t((Py_ssize_t)((h & 0x7fffffffu) % (size_t)count));
        if (part == NULL) {
            result = NULL;
            goto fallback;
        }
        Py_INCREF(queues);
        pq = PyDict_GetItemWithError(queues, part);
        Py_XINCREF(pq);
        Py_DECREF(queues);
        Py_DECREF(part);
        if (pq == NULL) {
            if (PyErr_Occurred())
                result = NULL;
            goto fallback;
        }
    }
    /* From here until the record is appended no Python code runs (exact bytes, int and
     * None; a bytearray grows; ints are not tracked by the GC), so what is read stays as
     * read. The append itself can (it drops the builder's kept payload): the objects
     * written after it are held. */
    PyObject *waiting = SF_SLOT(p, SF_SPACE_QUEUE), *builder;
    Py_ssize_t used, limit, reserved, held;
    acc = SF_SLOT(p, SF_ACC);
    if (!SF_IS(pq, 4) || SF_SLOT(pq, SF_TXN_ADDED) != Py_True || !SF_IS(acc, 3)
        || !sf_ssize(acc, SF_USED, &used) || !sf_ssize(acc, SF_LIMIT, &limit)
        || !sf_ssize(p, SF_RESERVED, &reserved) || waiting == NULL
        || !Py_IS_TYPE(waiting, sf_deque_type) || PyObject_Size(waiting) != 0
        || used > limit - reserved - charge) {
        acc = NULL;
        goto fallback;
    }
    Py_INCREF(acc);
    batch = SF_SLOT(pq, SF_OPEN);
    if (!SF_IS(batch, 5) || !sf_ssize(batch, SF_CHARGE, &held)) {
        batch = NULL;
        goto fallback;
    }
    Py_INCREF(batch);
    builder = SF_SLOT(batch, SF_BUILDER);
    if (builder == NULL || !PyObject_TypeCheck(builder, &BuilderType))
        goto fallback;
    /* the new values before the record goes in: a MemoryError leaves nothing changed */
    if ((sticky != NULL && (new_left = PyLong_FromSsize_t(left - charge)) == NULL)
        || (new_held = PyLong_FromSsize_t(held + charge)) == NULL
        || (new_used = PyLong_FromSsize_t(used + charge)) == NULL) {
        result = NULL;
        goto fallback;
    }
    PyObject *stamp = ts_obj == Py_None ? now_ms(NULL, NULL) : Py_NewRef(ts_obj);
    if (stamp == NULL) {
        result = NULL;
        goto fallback;
    }
    Py_ssize_t delta;
    long long t;
    Py_INCREF(builder);
    int r = builder_append_impl((BuilderObject *)builder, stamp, key, value, Py_None, &delta, &t);
    Py_DECREF(builder);
    Py_DECREF(stamp);
    if (r <= 0) { /* full: the Python path opens the next batch */
        if (r < 0)
            result = NULL;
        goto fallback;
    }
    /* nothing can fail from here on */
    if (sticky != NULL)
        Py_XSETREF(SF_SLOT(sticky, SF_LEFT), new_left);
    Py_XSETREF(SF_SLOT(batch, SF_CHARGE), new_held);
    Py_XSETREF(SF_SLOT(acc, SF_USED), new_used);
    hd->batch = batch; /* the reference held above */
    hd->delta = delta;
    hd->timestamp = t;
    hd->ksize = ksize;
    hd->vsize = vsize;
    Py_DECREF(ts);
    Py_DECREF(pq);
    Py_XDECREF(sticky);
    Py_DECREF(acc);
    return (PyObject *)hd;
fallback:
    Py_DECREF(ts);
    Py_XDECREF(pq);
    Py_XDECREF(sticky);
    Py_XDECREF(acc);
    Py_XDECREF(batch);
    Py_XDECREF(new_left);
    Py_XDECREF(new_held);
    Py_XDECREF(new_used);
    Py_XDECREF(hd);
    return Py_XNewRef(result);
}

static PyMethodDef methods[] = {
    {"decode_records", (PyCFunction)(void (*)(void))decode_records, METH_FASTCALL,
     "Decode an uncompressed v2 records section into NamedTuple records."},
    {"append_records", (PyCFunction)(void (*)(void))append_records, METH_FASTCALL,
     "Encode values[start:stop] (with keys) onto a bytearray while they fit."},
    {"murmur2", murmur2, METH_O, "Kafka's murmur2 key hash, unsigned 32 bits."},
    {"now_ms", now_ms, METH_NOARGS, "Wall-clock time in whole milliseconds."},
    {"append_to", (PyCFunction)(void (*)(void))append_to, METH_FASTCALL,
     "Append a record to batch.builder; its delivery handle, or None if full."},
    {"run_record_callbacks", (PyCFunction)(void (*)(void))run_record_callbacks, METH_FASTCALL,
     "Call each record's delivery callback with a handle; report what they raised."},
    {"bind_send", (PyCFunction)(void (*)(void))bind_send, METH_FASTCALL,
     "Bind the classes whose __slots__ send_fast reads."},
    {"send_fast", (PyCFunction)(void (*)(void))send_fast, METH_FASTCALL,
     "Producer.send()'s common case: the record's handle, or None for the Python path."},
    {NULL, NULL, 0, NULL},
};

/* Multi-phase init (PEP 489): PyInit__accel returns the definition, accel_exec fills
 * each module object's state. The producer's types and names below are still
 * process-wide statics, so the module declares no sub-interpreter support yet. */
static int
accel_exec(PyObject *mod)
{
    PyObject *probe = PyObject_CallFunction((PyObject *)&PyType_Type, "s(O){s:()}",
                                            "_Probe", (PyObject *)&PyTuple_Type,
                                            "__slots__");
    if (probe == NULL)
        return -1;
    get_state(mod)->plain_subclass_dealloc = ((PyTypeObject *)probe)->tp_dealloc;
    Py_DECREF(probe);
    if (PyType_Ready(&BuilderType) < 0 || PyType_Ready(&HandleType) < 0)
        return -1;
    if ((str_future = PyUnicode_InternFromString("future")) == NULL
        || (str_done = PyUnicode_InternFromString("done")) == NULL
        || (str_exception = PyUnicode_InternFromString("exception")) == NULL
        || (str_callbacks = PyUnicode_InternFromString("callbacks")) == NULL
        || (str_add_slow = PyUnicode_InternFromString("_add_callback_slow")) == NULL
        || (str_builder = PyUnicode_InternFromString("builder")) == NULL
        || (str_encode_headers = PyUnicode_InternFromString("_encode_headers")) == NULL)
        return -1;
    if (PyModule_AddObjectRef(mod, "RecordsBuilder", (PyObject *)&BuilderType) < 0
        || PyModule_AddObjectRef(mod, "DeliveryHandle", (PyObject *)&HandleType) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, accel_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "aiokproto._accel",
    .m_doc = "Compiled hot loops of the record codec (see aiokproto/accel.py).",
    .m_size = sizeof(accel_state),
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC
PyInit__accel(void)
{
    return PyModuleDef_Init(&module);
}
