/*
 * module.c: storage_core.record._kernel, klog's record hot loops in C - its functions table,
 * its types and constants, and the errors it raises (storage_core.errors). kernel.h lists the
 * units and says how they run without the GIL; _kernel.pyi is the Python view, and the
 * pure-Python twins (storage_core/record/columnar.py, records.py, txn_filter.py,
 * storage_core/cleaner) are the references the tests compare each function with.
 */
#include "kernel.h"

static PyMethodDef kernel_functions[] = {
    {"encode_v2_batches", kernel_encode_v2_batches, METH_VARARGS,
     "encode_v2_batches(keys, values, timestamps, header_counts, header_keys, header_values, start, stop, max_bytes,"
     " header) -> (list of records areas, or of whole batches when header is (base_offset, leader_epoch,"
     " attributes); int64 meta buffer of (end_row, first_ts, max_ts) per batch)"},
    {"encode_v2_rows", kernel_encode_v2_rows, METH_VARARGS,
     "encode_v2_rows(sources, which, local, max_bytes, header, out) -> (bytearray of the batches one after another,"
     " int64 meta buffer of (end_row, first_ts, max_ts, end_position) per batch): encode_v2_batches over rows"
     " picked in place from several sources"},
    {"crc32c", kernel_crc32c, METH_VARARGS, "crc32c(data, software=False) -> CRC-32C of a buffer"},
    {"lz4_frame_decompress", kernel_lz4_frame_decompress, METH_O,
     "lz4_frame_decompress(data) -> bytes | None: one LZ4 frame decoded, or None where the kernel declines it"},
    {"murmur2", kernel_murmur2, METH_VARARGS, "murmur2(keys, n) -> int32 buffer of Kafka's murmur2 hashes"},
    {"md5", kernel_md5, METH_VARARGS, "md5(data) -> the 16-byte MD5 digest (RFC 1321)"},
    {"retained_records", kernel_retained_records, METH_VARARGS,
     "retained_records(area, count, base_offset, base_timestamp, log_append_time, keep, delete_horizon)"
     " -> (records area, count, base_timestamp, max_timestamp) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernel_module = {
    PyModuleDef_HEAD_INIT, "storage_core.record._kernel", "klog's native record kernel.", -1, kernel_functions,
};

PyMODINIT_FUNC PyInit__kernel(void) {
    if (PyType_Ready(&OwnedBufferType) < 0 || PyType_Ready(&RecordsBuilderType) < 0 ||
        PyType_Ready(&TxnFilterType) < 0 || PyType_Ready(&OffsetMapType) < 0)
        return NULL;
    PyObject *errors = PyImport_ImportModule("storage_core.errors");
    if (!errors) return NULL;
    InvalidRecordError = PyObject_GetAttrString(errors, "InvalidRecordError");
    KlogError = PyObject_GetAttrString(errors, "KlogError");
    Py_DECREF(errors);
    if (!InvalidRecordError || !KlogError) return NULL;
    crc32c_init();
    PyObject *m = PyModule_Create(&kernel_module);
    if (!m) return NULL;
    Py_INCREF(&RecordsBuilderType);
    if (PyModule_AddObject(m, "RecordsBuilder", (PyObject *)&RecordsBuilderType) < 0) {
        Py_DECREF(&RecordsBuilderType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&TxnFilterType);
    if (PyModule_AddObject(m, "TxnFilter", (PyObject *)&TxnFilterType) < 0) {
        Py_DECREF(&TxnFilterType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&OffsetMapType);
    if (PyModule_AddObject(m, "OffsetMap", (PyObject *)&OffsetMapType) < 0) {
        Py_DECREF(&OffsetMapType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "CLEAN_END", CLEAN_END) < 0 || PyModule_AddIntConstant(m, "CLEAN_SHORT", CLEAN_SHORT) < 0 ||
        PyModule_AddIntConstant(m, "CLEAN_BATCH", CLEAN_BATCH) < 0 || PyModule_AddIntConstant(m, "CLEAN_FULL", CLEAN_FULL) < 0 ||
        PyModule_AddIntConstant(m, "CLEAN_LIMIT", CLEAN_LIMIT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "TXN_SKIP", TXN_SKIP) < 0 || PyModule_AddIntConstant(m, "TXN_ADMIT", TXN_ADMIT) < 0 ||
        PyModule_AddIntConstant(m, "TXN_MISSING_ENTRY", TXN_MISSING_ENTRY) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

