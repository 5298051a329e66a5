"""Scoring fixed trees on the plf accelerator: Client.lnl and ember.lnl
over ember_lnl (ember.h, "The plf accelerator"). The alignment, model and
trees handles live for one call; errors raise ember.Error with the
library's message ("path:line: reason", "newick[i]: reason")."""

import ctypes
import os

import numpy as np

from . import _lib
from ._lib import lib
from .errors import check

_PRECISIONS = {"double": _lib.EMBER_LNL_DOUBLE, "single": _lib.EMBER_LNL_SINGLE}


def _text_arg(value, what):
    """A str (or bytes) as NUL-free bytes."""
    if isinstance(value, str):
        value = value.encode()
    if not isinstance(value, bytes):
        raise TypeError("%s must be a str, not %s"
                        % (what, type(value).__name__))
    if b"\0" in value:
        raise ValueError("%s contains a NUL character" % what)
    return value


def _path_arg(value, what):
    return _text_arg(os.fspath(value), what)


def _c_strings(values, what):
    arr = (ctypes.c_char_p * max(len(values), 1))()
    for i, v in enumerate(values):
        arr[i] = _text_arg(v, "%s[%d]" % (what, i))
    return arr


def _read_alignment(alignment, type_):
    """An ember_alignment handle from a path, a dict name -> sequence or a
    sequence of (name, sequence) pairs."""
    t = None if type_ is None else _text_arg(type_, "type")
    h = ctypes.c_void_p()
    if isinstance(alignment, (str, bytes, os.PathLike)):
        check(lib.ember_alignment_read(_path_arg(alignment, "alignment"), t,
                                       ctypes.byref(h)))
        return h
    if isinstance(alignment, dict):
        pairs = list(alignment.items())
    else:
        try:
            pairs = [tuple(p) for p in alignment]
        except TypeError:
            raise TypeError("alignment must be a path, a dict name -> "
                            "sequence or a list of (name, sequence), not %s"
                            % type(alignment).__name__) from None
        if any(len(p) != 2 for p in pairs):
            raise ValueError("alignment: each item must be a (name, "
                             "sequence) pair")
    names = _c_strings([p[0] for p in pairs], "alignment name")
    seqs = _c_strings([p[1] for p in pairs], "alignment sequence")
    check(lib.ember_alignment_from_sequences(names, seqs, len(pairs), t,
                                             ctypes.byref(h)))
    return h


def _is_newick(text):
    return text.lstrip().startswith(b"(" if isinstance(text, bytes) else "(")


def _read_trees(trees, aln):
    """An ember_trees handle: a path (a str that does not start with '('
    or an os.PathLike), one Newick string, or a sequence of them."""
    h = ctypes.c_void_p()
    if isinstance(trees, os.PathLike) or (
            isinstance(trees, (str, bytes)) and not _is_newick(trees)):
        check(lib.ember_trees_read(_path_arg(trees, "trees"), aln,
                                   ctypes.byref(h)))
        return h
    if isinstance(trees, (str, bytes)):
        trees = [trees]
    try:
        trees = list(trees)
    except TypeError:
        raise TypeError("trees must be a path, a Newick string or a list of "
                        "them, not %s" % type(trees).__name__) from None
    arr = _c_strings([t.strip() if isinstance(t, (str, bytes)) else t
                      for t in trees], "trees")
    check(lib.ember_trees_parse(arr, len(trees), aln, ctypes.byref(h)))
    return h


def _params(precision, max_vectors, threads, instances, platform):
    p = _lib.EmberLnlParams()
    lib.ember_lnl_params_default(ctypes.byref(p))
    p.size = ctypes.sizeof(p)
    if precision not in _PRECISIONS:
        raise ValueError("precision must be 'double' or 'single', not %r"
                         % (precision,))
    p.precision = _PRECISIONS[precision]
    if max_vectors is not None:
        if isinstance(max_vectors, bool) or not isinstance(max_vectors, int):
            raise TypeError("max_vectors must be an int or None")
        if max_vectors < 1:
            raise ValueError("max_vectors is %d, must be at least 1"
                             % max_vectors)
        p.max_vectors = max_vectors
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int):
            raise TypeError("threads must be an int or None")
        if not 1 <= threads <= 1024:
            raise ValueError("threads is %d, out of range [1, 1024]" % threads)
        p.threads = threads
    if instances is not None:
        if isinstance(instances, bool) or not isinstance(instances, int):
            raise TypeError("instances must be an int or None")
        if not 1 <= instances <= 256:
            raise ValueError("instances is %d, out of range [1, 256]"
                             % instances)
        p.instances = instances
    if platform is not None:
        p.platform = _text_arg(platform, "platform")
    return p


def score(client_handle, alignment, trees, model, *, type=None, rates=None,
          site_lnl=False, precision="double", max_vectors=None, threads=None,
          instances=None, platform=None, report=False, progress=None):
    """The work of Client.lnl (its docstring is the manual)."""
    if model is None and rates is None:
        raise ValueError("give a model (e.g. 'GTR+G4'), a rates file, or "
                         "both")
    m_arg = None if model is None else _text_arg(model, "model")
    r_arg = None if rates is None else _path_arg(rates, "rates")
    params = _params(precision, max_vectors, threads, instances, platform)
    if progress is not None and not callable(progress):
        raise TypeError("progress must be callable")
    aln = model_h = trees_h = None
    try:
        aln = _read_alignment(alignment, type)
        model_h = ctypes.c_void_p()
        check(lib.ember_model_parse(m_arg, r_arg, aln,
                                    ctypes.byref(model_h)))
        trees_h = _read_trees(trees, aln)
        n = lib.ember_trees_count(trees_h)
        sites = lib.ember_alignment_sites(aln)
        lnl = np.empty(n, np.float64)
        site = np.empty((n, sites), np.float64) if site_lnl else None
        rep = _lib.EmberLnlReport()
        rep.size = ctypes.sizeof(rep)
        raised = []

        def on_progress(done, total, _user):
            if raised:
                return
            try:
                progress(done, total)
            except BaseException as e:  # re-raised once C returns
                raised.append(e)

        cb = _lib.PROGRESS_CB(on_progress) if progress else _lib.PROGRESS_CB()
        rc = lib.ember_lnl(client_handle, ctypes.byref(params), model_h,
                           trees_h, lnl.ctypes.data,
                           site.ctypes.data if site is not None else None,
                           ctypes.byref(rep), cb, None)
        check(rc)
        if raised:
            raise raised[0]
    finally:
        lib.ember_trees_free(trees_h)
        lib.ember_model_free(model_h)
        lib.ember_alignment_free(aln)
    out = (lnl, site) if site_lnl else (lnl,)
    if report:
        out += (_lib.struct_dict(rep),)
    return out if len(out) > 1 else lnl
