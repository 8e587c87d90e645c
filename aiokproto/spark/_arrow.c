/* aiokproto.spark._arrow: the Spark source's Arrow buffers from consumed records.
 *
 * Part of the spark extra, not of the record codec: aiokproto/spark/arrow.py loads it
 * (unless AIOKPROTO_PURE_PYTHON=1) and falls back to its Python reference,
 * to_record_batch_python, when it is absent or refuses its input; the two are compared
 * in tests/spark/test_spark_arrow.py. It is optional in setup.py like _accel, holds no
 * state (multi-phase init, PEP 489) and runs no Python code while it reads records.
 * Kept in C because a vectorised pyarrow build from Python lists costs 5-8x its time
 * (benchmarks/spark_arrow_bench.py, 10,000-record batches).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* One Arrow binary (or string) column being filled: validity bitmap (NULL until the
 * first null), int32 offsets, data. */
typedef struct {
    PyObject *validity, *offsets, *data;
    Py_ssize_t nulls, size; /* null count, data bytes so far */
} binary_col;

static void
binary_col_clear(binary_col *c)
{
    Py_CLEAR(c->validity);
    Py_CLEAR(c->offsets);
    Py_CLEAR(c->data);
}

/* Arrow's binary type has int32 offsets: a column holds at most 2 GiB - 1 bytes */
static int
add_size(binary_col *c, Py_ssize_t n, const char *what)
{
    if (n > INT32_MAX - c->size) {
        PyErr_Format(PyExc_OverflowError,
                     "the %s of one batch pass 2 GiB (Arrow binary offsets are int32)", what);
        return -1;
    }
    c->size += n;
    return 0;
}

static int
binary_col_alloc(binary_col *c, Py_ssize_t rows)
{
    c->offsets = PyBytes_FromStringAndSize(NULL, (rows + 1) * 4);
    if (c->offsets == NULL)
        return -1;
    ((int32_t *)PyBytes_AS_STRING(c->offsets))[0] = 0;
    return 0;
}

static int
set_null(binary_col *c, Py_ssize_t rows, Py_ssize_t i)
{
    if (c->validity == NULL) { /* all valid so far: set the bits of rows before i */
        Py_ssize_t nbytes = (rows + 7) / 8;
        c->validity = PyBytes_FromStringAndSize(NULL, nbytes);
        if (c->validity == NULL)
            return -1;
        uint8_t *bits = (uint8_t *)PyBytes_AS_STRING(c->validity);
        memset(bits, 0, nbytes);
        for (Py_ssize_t j = 0; j < i; j++)
            bits[j >> 3] |= (uint8_t)(1u << (j & 7));
    }
    c->nulls++;
    return 0;
}

/* Row i of the column is `obj` (bytes or None; a str when `str` is set): its offset and
 * validity are written, its size counted. The data is copied by binary_col_copy. */
static int
binary_col_row(binary_col *c, Py_ssize_t rows, Py_ssize_t i, PyObject *obj, int str,
               const char *what)
{
    Py_ssize_t n;
    if (obj == Py_None && !str) {
        if (set_null(c, rows, i) < 0)
            return -1;
        n = 0;
    } else {
        if (str ? !PyUnicode_Check(obj) : !PyBytes_Check(obj)) {
            PyErr_Format(PyExc_TypeError, "record %zd: %s must be %s, not %.100s", i, what,
                         str ? "str" : "bytes or None", Py_TYPE(obj)->tp_name);
            return -1;
        }
        if (str) {
            /* UTF-8 form cached on the str (ASCII str are their own UTF-8) */
            if (PyUnicode_AsUTF8AndSize(obj, &n) == NULL)
                return -1;
        } else {
            n = PyBytes_GET_SIZE(obj);
        }
        if (c->validity != NULL)
            ((uint8_t *)PyBytes_AS_STRING(c->validity))[i >> 3] |= (uint8_t)(1u << (i & 7));
        if (add_size(c, n, what) < 0)
            return -1;
    }
    ((int32_t *)PyBytes_AS_STRING(c->offsets))[i + 1] = (int32_t)c->size;
    return 0;
}

static int
binary_col_data(binary_col *c)
{
    c->data = PyBytes_FromStringAndSize(NULL, c->size);
    return c->data == NULL ? -1 : 0;
}

/* (validity or None, offsets, data, null count) */
static PyObject *
binary_col_result(binary_col *c)
{
    return Py_BuildValue("(OOOn)", c->validity == NULL ? Py_None : c->validity, c->offsets,
                         c->data, c->nulls);
}

/* copy row i's bytes (checked by binary_col_row) into the data buffer */
static inline void
binary_col_copy(binary_col *c, Py_ssize_t i, PyObject *obj, int str)
{
    const int32_t *offs = (const int32_t *)PyBytes_AS_STRING(c->offsets);
    Py_ssize_t n = offs[i + 1] - offs[i];
    if (n == 0)
        return;
    const char *src;
    if (str) {
        Py_ssize_t ignored;
        src = PyUnicode_AsUTF8AndSize(obj, &ignored); /* cached by the first pass */
    } else {
        src = PyBytes_AS_STRING(obj);
    }
    memcpy(PyBytes_AS_STRING(c->data) + offs[i], src, n);
}

/* an int field as int64 (exactly int: bool is refused, as pyarrow does, and a subclass
 * may compute timestamp * 1000 its own way in the reference; no __index__: no Python
 * code may run while the records are read) */
static int
int_field(PyObject *o, Py_ssize_t i, const char *what, long long *out)
{
    if (!PyLong_CheckExact(o)) {
        PyErr_Format(PyExc_TypeError, "record %zd: %s must be an int, not %.100s", i, what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyLong_AsLongLong(o);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* Field positions in ConsumerRecord (tests/records/test_accel.py checks them). */
enum { F_OFFSET = 2, F_TIMESTAMP = 3, F_TYPE = 4, F_KEY = 5, F_VALUE = 6, F_HEADERS = 7 };

/* arrow_columns(records, cls, include_headers) -> tuple of buffers
 *
 * The Arrow buffers of the Spark source's columns for a list of `cls` records
 * (ConsumerRecord): (key, value, offsets, timestamps, timestamp types[, headers]) where
 * key and value are (validity or None, int32 offsets, data, null count), offsets int64,
 * timestamps int64 microseconds, types int32; headers, when asked for, are (int32 list
 * offsets, (key) string column, (value) binary column, header count). The Python
 * reference is aiokproto.spark.arrow.to_record_batch_python; anything it would build
 * differently (other field types) raises TypeError (OverflowError for out-of-range
 * numbers or a column over 2 GiB), and arrow.py then runs the reference. */
static PyObject *
arrow_columns(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "arrow_columns takes 3 arguments");
        return NULL;
    }
    PyObject *records = args[0];
    if (!PyList_Check(records) && !PyTuple_Check(records)) {
        PyErr_SetString(PyExc_TypeError, "arrow_columns: records must be a list or tuple");
        return NULL;
    }
    if (!PyType_Check(args[1])
        || !PyType_IsSubtype((PyTypeObject *)args[1], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "arrow_columns: cls must be a tuple subclass");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[1];
    int headers = PyObject_IsTrue(args[2]);
    if (headers < 0)
        return NULL;
    /* items are read in place: nothing below runs Python code, so the list cannot
     * change under the loops */
    PyObject **items = PySequence_Fast_ITEMS(records);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(records);

    binary_col key = {0}, value = {0}, hkey = {0}, hvalue = {0};
    PyObject *offsets = NULL, *timestamps = NULL, *types = NULL, *lists = NULL;
    PyObject *result = NULL;
    if (binary_col_alloc(&key, n) < 0 || binary_col_alloc(&value, n) < 0)
        goto done;
    if ((offsets = PyBytes_FromStringAndSize(NULL, n * 8)) == NULL
        || (timestamps = PyBytes_FromStringAndSize(NULL, n * 8)) == NULL
        || (types = PyBytes_FromStringAndSize(NULL, n * 4)) == NULL)
        goto done;
    int64_t *off_out = (int64_t *)PyBytes_AS_STRING(offsets);
    int64_t *ts_out = (int64_t *)PyBytes_AS_STRING(timestamps);
    int32_t *type_out = (int32_t *)PyBytes_AS_STRING(types);
    int32_t *list_out = NULL;
    if (headers) {
        if ((lists = PyBytes_FromStringAndSize(NULL, (n + 1) * 4)) == NULL)
            goto done;
        list_out = (int32_t *)PyBytes_AS_STRING(lists);
        list_out[0] = 0;
    }
    Py_ssize_t nheaders = 0;

    /* first pass: check every field, write the fixed-width columns and the offsets,
     * count the bytes of the data buffers */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = items[i];
        if (Py_TYPE(r) != cls || PyTuple_GET_SIZE(r) <= F_HEADERS) {
            PyErr_Format(PyExc_TypeError, "record %zd must be a %.100s, not %.100s", i,
                         cls->tp_name, Py_TYPE(r)->tp_name);
            goto done;
        }
        long long off, ts, type;
        if (int_field(PyTuple_GET_ITEM(r, F_OFFSET), i, "offset", &off) < 0
            || int_field(PyTuple_GET_ITEM(r, F_TIMESTAMP), i, "timestamp", &ts) < 0
            || int_field(PyTuple_GET_ITEM(r, F_TYPE), i, "timestamp_type", &type) < 0)
            goto done;
        /* Kafka timestamps are milliseconds, Spark's microseconds */
        if (__builtin_mul_overflow(ts, 1000, &ts_out[i])) {
            PyErr_Format(PyExc_OverflowError, "record %zd: timestamp %lld ms overflows int64 "
                         "microseconds", i, ts);
            goto done;
        }
        if (type < INT32_MIN || type > INT32_MAX) {
            PyErr_Format(PyExc_OverflowError, "record %zd: timestamp_type %lld overflows "
                         "int32", i, type);
            goto done;
        }
        off_out[i] = off;
        type_out[i] = (int32_t)type;
        if (binary_col_row(&key, n, i, PyTuple_GET_ITEM(r, F_KEY), 0, "key") < 0
            || binary_col_row(&value, n, i, PyTuple_GET_ITEM(r, F_VALUE), 0, "value") < 0)
            goto done;
        if (headers) {
            PyObject *h = PyTuple_GET_ITEM(r, F_HEADERS);
            /* exact tuples: the reference iterates headers and pairs, which a subclass's
             * __iter__ could answer differently */
            if (!PyTuple_CheckExact(h)) {
                PyErr_Format(PyExc_TypeError, "record %zd: headers must be a tuple, not "
                             "%.100s", i, Py_TYPE(h)->tp_name);
                goto done;
            }
            Py_ssize_t hn = PyTuple_GET_SIZE(h);
            for (Py_ssize_t j = 0; j < hn; j++) {
                PyObject *pair = PyTuple_GET_ITEM(h, j);
                if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) {
                    PyErr_Format(PyExc_TypeError, "record %zd: a header must be a (key, "
                                 "value) tuple", i);
                    goto done;
                }
            }
            if (hn > INT32_MAX - nheaders) {
                PyErr_SetString(PyExc_OverflowError, "more than 2**31 - 1 headers in one "
                                "batch");
                goto done;
            }
            nheaders += hn;
            list_out[i + 1] = (int32_t)nheaders;
        }
    }
    if (headers) {
        /* the header columns, now that their length is known */
        if (binary_col_alloc(&hkey, nheaders) < 0 || binary_col_alloc(&hvalue, nheaders) < 0)
            goto done;
        Py_ssize_t k = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *h = PyTuple_GET_ITEM(items[i], F_HEADERS);
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(h); j++, k++) {
                PyObject *pair = PyTuple_GET_ITEM(h, j);
                if (binary_col_row(&hkey, nheaders, k, PyTuple_GET_ITEM(pair, 0), 1,
                                   "header key") < 0
                    || binary_col_row(&hvalue, nheaders, k, PyTuple_GET_ITEM(pair, 1), 0,
                                      "header value") < 0)
                    goto done;
            }
        }
    }

    /* second pass: copy the data, all of it checked above */
    if (binary_col_data(&key) < 0 || binary_col_data(&value) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        binary_col_copy(&key, i, PyTuple_GET_ITEM(items[i], F_KEY), 0);
        binary_col_copy(&value, i, PyTuple_GET_ITEM(items[i], F_VALUE), 0);
    }
    PyObject *key_r = NULL, *value_r = NULL, *hkey_r = NULL, *hvalue_r = NULL;
    if (headers) {
        if (binary_col_data(&hkey) < 0 || binary_col_data(&hvalue) < 0)
            goto done;
        Py_ssize_t k = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *h = PyTuple_GET_ITEM(items[i], F_HEADERS);
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(h); j++, k++) {
                PyObject *pair = PyTuple_GET_ITEM(h, j);
                binary_col_copy(&hkey, k, PyTuple_GET_ITEM(pair, 0), 1);
                binary_col_copy(&hvalue, k, PyTuple_GET_ITEM(pair, 1), 0);
            }
        }
    }
    if ((key_r = binary_col_result(&key)) != NULL
        && (value_r = binary_col_result(&value)) != NULL) {
        if (!headers) {
            result = PyTuple_Pack(5, key_r, value_r, offsets, timestamps, types);
        } else if ((hkey_r = binary_col_result(&hkey)) != NULL
                   && (hvalue_r = binary_col_result(&hvalue)) != NULL) {
            PyObject *hcols = Py_BuildValue("(OOOn)", lists, hkey_r, hvalue_r, nheaders);
            if (hcols != NULL)
                result = PyTuple_Pack(6, key_r, value_r, offsets, timestamps, types, hcols);
            Py_XDECREF(hcols);
        }
    }
    Py_XDECREF(key_r);
    Py_XDECREF(value_r);
    Py_XDECREF(hkey_r);
    Py_XDECREF(hvalue_r);
done:
    binary_col_clear(&key);
    binary_col_clear(&value);
    binary_col_clear(&hkey);
    binary_col_clear(&hvalue);
    Py_XDECREF(offsets);
    Py_XDECREF(timestamps);
    Py_XDECREF(types);
    Py_XDECREF(lists);
    return result;
}

static PyMethodDef methods[] = {
    {"arrow_columns", (PyCFunction)(void (*)(void))arrow_columns, METH_FASTCALL,
     "The Arrow buffers of the Spark source's columns for a list of records."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot slots[] = {
#ifdef Py_mod_multiple_interpreters
    /* no module state, no static types, no globals */
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "aiokproto.spark._arrow",
    .m_doc = "The Spark source's Arrow buffers from consumed records (see "
             "aiokproto/spark/arrow.py).",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC
PyInit__arrow(void)
{
    return PyModuleDef_Init(&module);
}
