/* The walk over the records of a Kafka v2 batch that the leader's append does (LogValidator's),
 * in C: kafka_record_section.check_records' fast path.
 *
 * Guarantees: check_records(body, count) answers the list of the indexes of
 * the records without a key exactly when the Python walker
 * (kafka_record_section._check_records_py) would answer that same list, and
 * None otherwise: for every malformed section, and for what this walker does
 * not read (a varint longer than 9 bytes). On None the caller runs the Python
 * walker, which raises Kafka's error for the bytes or answers; so this file
 * decides nothing on its own, it only makes the common case cheap. It reads
 * `body` through the buffer protocol, never past its end, and holds no
 * reference to it after returning.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A zigzag varint of at most 9 bytes within [*pos, end): 0 and the value, or -1 (truncated, or longer:
 * the Python walker decides those). */
static int read_varint(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    uint64_t r = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (;;) {
        if (p >= end || shift > 56)
            return -1;
        unsigned char c = b[p++];
        r |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80))
            break;
        shift += 7;
    }
    *out = (int64_t)(r >> 1) ^ -(int64_t)(r & 1);
    *pos = p;
    return 0;
}

/* 0 with the record's key-less flag, or -1 where the record is malformed (or not read here). */
static int walk_record(const unsigned char *b, Py_ssize_t *pos_io, Py_ssize_t end, Py_ssize_t i, int *nokey)
{
    Py_ssize_t pos = *pos_io;
    int64_t length, v, n;
    if (read_varint(b, &pos, end, &length) || length < 0 || length > end - pos)
        return -1;
    Py_ssize_t rec_end = pos + (Py_ssize_t)length;
    pos += 1;                                           /* record attributes */
    if (read_varint(b, &pos, rec_end, &v))              /* timestamp delta: any value */
        return -1;
    if (read_varint(b, &pos, rec_end, &v) || v != (int64_t)i)   /* offset delta */
        return -1;
    if (read_varint(b, &pos, rec_end, &v))              /* key */
        return -1;
    if (v == -1)
        *nokey = 1;
    else if (v < 0 || v > rec_end - pos)
        return -1;
    else
        pos += (Py_ssize_t)v;
    if (read_varint(b, &pos, rec_end, &v))              /* value */
        return -1;
    if (v != -1) {
        if (v < 0 || v > rec_end - pos)
            return -1;
        pos += (Py_ssize_t)v;
    }
    int64_t headers;
    if (read_varint(b, &pos, rec_end, &headers) || headers < 0)
        return -1;
    for (int64_t h = 0; h < headers; h++) {
        if (read_varint(b, &pos, rec_end, &n) || n < 0 || n > rec_end - pos)   /* header key: never null */
            return -1;
        pos += (Py_ssize_t)n;
        if (read_varint(b, &pos, rec_end, &n) || n < -1 || (n > 0 && n > rec_end - pos))
            return -1;
        if (n > 0)
            pos += (Py_ssize_t)n;
    }
    if (pos != rec_end)
        return -1;
    *pos_io = pos;
    return 0;
}

static PyObject *check_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n:check_records", &view, &count))
        return NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len, pos = 0;
    PyObject *nokey = PyList_New(0);
    if (nokey == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int ok = 1;
    for (Py_ssize_t i = 0; i < count; i++) {
        int keyless = 0;
        if (walk_record(b, &pos, end, i, &keyless)) {
            ok = 0;
            break;
        }
        if (keyless) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL || PyList_Append(nokey, index)) {
                Py_XDECREF(index);
                Py_DECREF(nokey);
                PyBuffer_Release(&view);
                return NULL;
            }
            Py_DECREF(index);
        }
    }
    PyBuffer_Release(&view);
    if (!ok || pos != end) {
        Py_DECREF(nokey);
        Py_RETURN_NONE;
    }
    return nokey;
}

static PyMethodDef methods[] = {
    {"check_records", check_records, METH_VARARGS,
     "check_records(body, count) -> list of the key-less records' indexes, or None (malformed: ask the "
     "Python walker)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_records_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__records_native(void)
{
    return PyModule_Create(&module);
}
