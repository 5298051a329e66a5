"""ctypes declarations of libember.so.0 (client/include/ember/ember.h).

Every struct here mirrors its C counterpart field by field, in order, with
the same C types, so ctypes lays it out with the same padding; the tests
compare sizeof and each offset with the C compiler's. Structs grow only at
the end (ember.h, "ABI"): a struct passed in carries ctypes.sizeof of its
mirror in its size field, and one the library owns (ember_task_info, the
listing's) is read only as far as the library's size field says.

The library is EMBER_LIBRARY when set (a path), else libember.so.0 from
the loader's search path, else whatever ctypes.util.find_library("ember")
finds.
"""

import ctypes
import ctypes.util
import os

c_size_t = ctypes.c_size_t
c_uint64 = ctypes.c_uint64
c_int32 = ctypes.c_int32
c_int = ctypes.c_int
c_uint = ctypes.c_uint
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
c_double = ctypes.c_double
POINTER = ctypes.POINTER


class EmberOptions(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("client_name", c_char_p),
        ("embedded_threads", c_uint),
        ("connect_timeout_ms", c_int),
        ("no_fallback", c_int),
        ("max_frame", c_size_t),
        ("plugin_dir", c_char_p),
        ("reconnect_window_ms", c_int),
    ]


class EmberTaskInfo(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("platform", c_char_p),
        ("platform_kind", c_char_p),
        ("fell_back", c_int),
        ("queue_ns", c_uint64),
        ("exec_ns", c_uint64),
        ("server_ns", c_uint64),
        ("round_trip_ns", c_uint64),
        ("stage_in_ns", c_uint64),
        ("stage_out_ns", c_uint64),
        ("attempts", c_uint),
    ]


TASK_CB = ctypes.CFUNCTYPE(None, c_void_p, c_void_p)


class EmberSubmitOptions(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("priority", c_int),
        ("platform", c_char_p),
        ("prefer", c_char_p),
        ("callback", TASK_CB),
        ("user", c_void_p),
        ("states", POINTER(c_void_p)),
        ("n_states", c_size_t),
        ("outputs", POINTER(c_void_p)),
        ("n_outputs", c_size_t),
    ]


EMBER_SW_DNA = 0
EMBER_SW_PROTEIN = 1


class EmberSwParams(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("alphabet", c_int),          # enum ember_sw_alphabet
        ("match", c_int),
        ("mismatch", c_int),
        ("matrix", c_char_p),
        ("gap_open", c_int),
        ("gap_extend", c_int),
        ("platform", c_char_p),
        ("prefer", c_char_p),
        ("pairs_per_task", c_size_t),
    ]


class EmberSeq(ctypes.Structure):
    _fields_ = [("residues", c_void_p), ("length", c_size_t)]


class EmberSwResult(ctypes.Structure):
    _fields_ = [
        ("score", c_int32),
        ("query_start", c_int32),
        ("query_end", c_int32),
        ("ref_start", c_int32),
        ("ref_end", c_int32),
    ]


class EmberSwReport(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("tasks", c_size_t),
        ("tasks_fallback", c_size_t),
        ("tasks_cpu", c_size_t),
        ("tasks_opencl", c_size_t),
        ("tasks_fpga_emu", c_size_t),
        ("tasks_retried", c_size_t),
        ("cells", c_uint64),
        ("queue_ns", c_uint64),
        ("exec_ns", c_uint64),
        ("server_ns", c_uint64),
        ("round_trip_ns", c_uint64),
        ("wall_ns", c_uint64),
        ("tasks_failed", c_size_t),
        ("pairs_failed", c_size_t),
    ]


EMBER_LNL_DOUBLE = 0
EMBER_LNL_SINGLE = 1

LNL_TREE_CB = ctypes.CFUNCTYPE(c_int, c_size_t, c_double, POINTER(c_double),
                               c_size_t, c_void_p)


class EmberLnlParams(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("precision", c_int),         # enum ember_lnl_precision
        ("max_vectors", c_size_t),
        ("threads", c_uint),
        ("platform", c_char_p),
        ("site_lnl", c_int),
        ("tree_cb", LNL_TREE_CB),
        ("tree_user", c_void_p),
        ("instances", c_uint),
    ]


class EmberLnlReport(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("trees", c_size_t),
        ("trees_failed", c_size_t),
        ("patterns", c_size_t),
        ("tasks", c_size_t),
        ("tasks_cpu", c_size_t),
        ("tasks_opencl", c_size_t),
        ("tasks_fpga_emu", c_size_t),
        ("tasks_other", c_size_t),
        ("tasks_failed", c_size_t),
        ("setups", c_size_t),
        ("ops", c_uint64),
        ("recomputed", c_uint64),
        ("hits", c_uint64),
        ("vectors", c_size_t),
        ("state_bytes", c_uint64),
        ("exec_ns", c_uint64),
        ("wall_ns", c_uint64),
        ("instances", c_size_t),
    ]


class EmberPairInfo(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("accelerator", c_char_p),
        ("state", c_char_p),
        ("completed", c_uint64),
        ("errors", c_uint64),
        ("timeouts", c_uint64),
        ("disabled_count", c_uint64),
        ("consecutive_failures", c_uint),
        ("speed", c_char_p),
        ("fixed_ns", c_double),
        ("ns_per_unit", c_double),
    ]


class EmberPlatformInfo(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("name", c_char_p),
        ("kind", c_char_p),
        ("state", c_char_p),
        ("device", c_char_p),
        ("loaded", c_char_p),
        ("workers", c_uint),
        ("queued", c_uint),
        ("running", c_uint),
        ("completed", c_uint64),
        ("failed", c_uint64),
        ("retried", c_uint64),
        ("timeouts", c_uint64),
        ("reprograms", c_uint64),
        ("cache_budget", c_uint64),
        ("cache_resident", c_uint64),
        ("cache_blocks", c_uint64),
        ("cache_hits", c_uint64),
        ("cache_misses", c_uint64),
        ("cache_evictions", c_uint64),
        ("bytes_to", c_uint64),
        ("bytes_from", c_uint64),
        ("n_pairs", c_size_t),
        ("pairs", POINTER(POINTER(EmberPairInfo))),
    ]


class EmberAccelInfo(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("name", c_char_p),
        ("version", c_uint),
        ("platforms", c_char_p),
        ("queued", c_uint),
        ("origin", c_char_p),
    ]


class EmberClientStats(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("tasks_submitted", c_uint64),
        ("tasks_completed", c_uint64),
        ("tasks_fallback", c_uint64),
        ("reconnects", c_uint64),
        ("bytes_sent", c_uint64),
        ("bytes_received", c_uint64),
        ("bytes_sent_by_fd", c_uint64),
        ("plugins_loaded", c_uint64),
        ("plugins_refused", c_uint64),
        ("tasks_resubmitted", c_uint64),
    ]


class EmberTrainEpoch(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("epoch", c_uint),
        ("epochs", c_uint),
        ("loss", c_double),
        ("train_accuracy", c_double),
        ("test_accuracy", c_double),
        ("seconds", c_double),
        ("images_per_second", c_double),
        ("n_stages", c_size_t),
        ("stage_busy", POINTER(c_double)),
        ("stage_platform", POINTER(c_char_p)),
    ]


TRAIN_EPOCH_CB = ctypes.CFUNCTYPE(c_int, POINTER(EmberTrainEpoch), c_void_p)
PROGRESS_CB = ctypes.CFUNCTYPE(None, c_size_t, c_size_t, c_void_p)


class EmberTrainParams(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("net_path", c_char_p),
        ("net_text", c_char_p),
        ("net_len", c_size_t),
        ("data_dir", c_char_p),
        ("train_images", c_void_p),   # const float *
        ("train_labels", c_void_p),   # const uint8_t *
        ("n_train", c_size_t),
        ("test_images", c_void_p),
        ("test_labels", c_void_p),
        ("n_test", c_size_t),
        ("train_limit", c_size_t),
        ("test_limit", c_size_t),
        ("epochs", c_uint),
        ("batch", c_uint),
        ("micro_batch", c_uint),
        ("learning_rate", c_double),
        ("momentum", c_double),
        ("decay", c_double),
        ("stages", c_uint),
        ("platform", c_char_p),
        ("sync", c_int),
        ("seed", c_uint64),
        ("load_path", c_char_p),
        ("save_path", c_char_p),
        ("epoch_cb", TRAIN_EPOCH_CB),
        ("progress", PROGRESS_CB),
        ("user", c_void_p),
        ("layer_split_only", c_int),
        ("fixed_splits", c_int),
    ]


class EmberTrainResult(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("epochs", c_uint),
        ("loss", c_double),
        ("train_accuracy", c_double),
        ("test_accuracy", c_double),
        ("seconds", c_double),
        ("tasks", c_size_t),
    ]


# Every mirror, by its C name: what the ABI test compares.
STRUCTS = {
    "ember_options": EmberOptions,
    "ember_task_info": EmberTaskInfo,
    "ember_submit_options": EmberSubmitOptions,
    "ember_sw_params": EmberSwParams,
    "ember_seq": EmberSeq,
    "ember_sw_result": EmberSwResult,
    "ember_sw_report": EmberSwReport,
    "ember_lnl_params": EmberLnlParams,
    "ember_lnl_report": EmberLnlReport,
    "ember_pair_info": EmberPairInfo,
    "ember_platform_info": EmberPlatformInfo,
    "ember_accel_info": EmberAccelInfo,
    "ember_client_stats": EmberClientStats,
    "ember_train_epoch": EmberTrainEpoch,
    "ember_train_params": EmberTrainParams,
    "ember_train_result": EmberTrainResult,
}

# name: (restype, argtypes)
_PROTOTYPES = {
    "ember_version": (c_char_p, []),
    "ember_strerror": (c_char_p, [c_int]),
    "ember_errname": (c_char_p, [c_int]),
    "ember_last_error": (c_char_p, []),
    "ember_connect": (c_int, [c_char_p, POINTER(EmberOptions),
                              POINTER(c_void_p)]),
    "ember_close": (None, [c_void_p]),
    "ember_is_connected": (c_int, [c_void_p]),
    "ember_client_address": (c_char_p, [c_void_p]),
    "ember_block_alloc": (c_int, [c_void_p, c_size_t, c_uint,
                                  POINTER(c_void_p), POINTER(c_void_p)]),
    "ember_block_seal": (c_int, [c_void_p]),
    "ember_block_size": (c_size_t, [c_void_p]),
    "ember_block_release": (None, [c_void_p]),
    "ember_block_read": (c_int, [c_void_p, POINTER(c_void_p),
                                 POINTER(c_size_t), POINTER(c_uint64)]),
    "ember_block_sync": (c_int, [c_void_p, POINTER(c_uint64)]),
    "ember_block_restore": (c_int, [c_void_p, POINTER(c_uint64)]),
    "ember_submit": (c_int, [c_void_p, c_char_p, c_char_p, c_size_t,
                             POINTER(c_void_p), c_size_t,
                             POINTER(EmberSubmitOptions), POINTER(c_void_p)]),
    "ember_task_wait": (c_int, [c_void_p, c_int]),
    "ember_task_done": (c_int, [c_void_p]),
    "ember_task_status": (c_int, [c_void_p]),
    "ember_task_message": (c_char_p, [c_void_p]),
    "ember_task_output": (c_void_p, [c_void_p, POINTER(c_size_t)]),
    "ember_task_get_info": (POINTER(EmberTaskInfo), [c_void_p]),
    "ember_task_cancel": (c_int, [c_void_p]),
    "ember_task_free": (None, [c_void_p]),
    "ember_sw_params_default": (None, [POINTER(EmberSwParams)]),
    "ember_platform_kind": (c_char_p, [c_size_t]),
    "ember_sw_align": (c_int, [c_void_p, POINTER(EmberSwParams), c_void_p,
                               c_void_p, c_size_t, c_void_p,
                               POINTER(EmberSwReport), PROGRESS_CB,
                               c_void_p]),
    "ember_alignment_read": (c_int, [c_char_p, c_char_p, POINTER(c_void_p)]),
    "ember_alignment_from_sequences": (c_int, [POINTER(c_char_p),
                                               POINTER(c_char_p), c_size_t,
                                               c_char_p, POINTER(c_void_p)]),
    "ember_alignment_taxa": (c_size_t, [c_void_p]),
    "ember_alignment_sites": (c_size_t, [c_void_p]),
    "ember_alignment_patterns": (c_size_t, [c_void_p]),
    "ember_alignment_name": (c_char_p, [c_void_p, c_size_t]),
    "ember_alignment_type": (c_char_p, [c_void_p]),
    "ember_alignment_free": (None, [c_void_p]),
    "ember_model_parse": (c_int, [c_char_p, c_char_p, c_void_p,
                                  POINTER(c_void_p)]),
    "ember_model_name": (c_char_p, [c_void_p]),
    "ember_model_free": (None, [c_void_p]),
    "ember_trees_read": (c_int, [c_char_p, c_void_p, POINTER(c_void_p)]),
    "ember_trees_parse": (c_int, [POINTER(c_char_p), c_size_t, c_void_p,
                                  POINTER(c_void_p)]),
    "ember_trees_count": (c_size_t, [c_void_p]),
    "ember_trees_free": (None, [c_void_p]),
    "ember_lnl_min_vectors": (c_size_t, [c_size_t]),
    "ember_lnl_params_default": (None, [POINTER(EmberLnlParams)]),
    "ember_lnl": (c_int, [c_void_p, POINTER(EmberLnlParams), c_void_p,
                          c_void_p, c_void_p, c_void_p,
                          POINTER(EmberLnlReport), PROGRESS_CB, c_void_p]),
    "ember_list_accelerators": (c_int, [c_void_p, POINTER(c_void_p)]),
    "ember_listing_accelerators": (c_size_t, [c_void_p]),
    "ember_listing_accelerator": (POINTER(EmberAccelInfo),
                                  [c_void_p, c_size_t]),
    "ember_listing_platforms": (c_size_t, [c_void_p]),
    "ember_listing_platform": (POINTER(EmberPlatformInfo),
                               [c_void_p, c_size_t]),
    "ember_listing_free": (None, [c_void_p]),
    "ember_client_get_stats": (None, [c_void_p, POINTER(EmberClientStats)]),
    "ember_train_params_default": (None, [POINTER(EmberTrainParams)]),
    "ember_train": (c_int, [POINTER(c_void_p), c_size_t,
                            POINTER(EmberTrainParams),
                            POINTER(EmberTrainResult)]),
    "ember_train_plan": (c_int, [POINTER(c_void_p), c_size_t,
                                 POINTER(EmberTrainParams),
                                 POINTER(c_void_p)]),
}

# Functions a libember.so.0 older than the binding may lack: declared when
# present, and the calls that need them raise ember.Error
# (EMBER_ENOTFOUND) otherwise (has() tells).
_OPTIONAL = frozenset(("ember_train_params_default", "ember_train",
                       "ember_train_plan"))


def _load():
    path = os.environ.get("EMBER_LIBRARY")
    if path:
        return ctypes.CDLL(path)
    try:
        return ctypes.CDLL("libember.so.0")
    except OSError:
        found = ctypes.util.find_library("ember")
        if not found:
            raise ImportError("libember.so.0 not found: install libember0 "
                              "or set EMBER_LIBRARY to its path") from None
        return ctypes.CDLL(found)


lib = _load()
_missing = set()
for _name, (_res, _args) in _PROTOTYPES.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        if _name not in _OPTIONAL:
            raise
        _missing.add(_name)
        continue
    _f.restype = _res
    _f.argtypes = _args

# free() for what ember_block_read malloc'd: the process's C library, the
# one libember links.
libc = ctypes.CDLL(None)
libc.free.restype = None
libc.free.argtypes = [c_void_p]


def has(name):
    """True when the loaded library has the function name (one of
    _OPTIONAL may be missing from an older libember.so.0)."""
    return name in _PROTOTYPES and name not in _missing


def text(p):
    """A C string from the library as str ("" for NULL)."""
    return p.decode("utf-8", "replace") if p else ""


def struct_dict(s, skip=()):
    """The fields of a struct mirror as a dict, strings decoded; only the
    fields the library's size field covers (the others are None)."""
    have = getattr(s, "size", ctypes.sizeof(s)) or ctypes.sizeof(s)
    out = {}
    for name, ctype in s._fields_:
        if name == "size" or name in skip:
            continue
        field = getattr(type(s), name)
        if field.offset + field.size > have:
            out[name] = None
            continue
        v = getattr(s, name)
        out[name] = text(v) if ctype is c_char_p else v
    return out
