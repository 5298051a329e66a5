"""CNN training on the cnn accelerator: Client.train, Client.evaluate,
Client.train_plan and the module's ember.train, ember.evaluate and
ember.train_plan over ember_train and ember_train_plan (ember.h, "CNN
training").

The network is a darknet .cfg: a path, its text, or a list of layer dicts
(_cnn_cfg.cfg_from_layers writes their text). The data are numpy arrays
(images NCHW, converted to C-contiguous float32; labels to uint8) checked
here against the network's input shape before anything reaches C, or an
idx directory (data=). The epoch callback collects one dict per epoch;
what a Python callback raises is kept and raised again once ember_train
has returned.
"""

import ctypes
import math
import operator
import os

import numpy as np

from . import _lib
from ._cnn_cfg import cfg_from_layers, input_shape
from ._lib import lib
from ._lnl import _path_arg, _text_arg
from .errors import Error, check, EMBER_EIO, EMBER_ENOTFOUND

_UINT_MAX = (1 << 32) - 1
_SIZE_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1


def _need(name):
    if not _lib.has(name):
        raise Error(EMBER_ENOTFOUND, "this libember.so.0 has no %s (it is "
                    "older than the Python binding)" % name)


def _int(value, what, lo, hi):
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("%s must be an int, not bool" % what)
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an int, not %s"
                        % (what, type(value).__name__)) from None
    if not lo <= v <= hi:
        raise ValueError("%s is %d, out of range [%d, %d]" % (what, v, lo, hi))
    return v


def _opt_int(value, what, lo=1, hi=_UINT_MAX):
    """None as 0 (the library's "default"), else an int in [lo, hi]."""
    return 0 if value is None else _int(value, what, lo, hi)


def _rate(value, what):
    """None as -1 (the .cfg's), else a finite number >= 0."""
    if value is None:
        return -1.0
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise TypeError("%s must be a number or None, not %s"
                        % (what, type(value).__name__))
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ValueError("%s is %r, must be a finite number >= 0 (None: "
                         "the .cfg's)" % (what, value))
    return v


def _nan_none(v):
    return None if v is None or v != v else v


class _Net:
    """The net argument: path or text for C, and the input shape the
    arrays are checked against (read when needed)."""

    def __init__(self, net):
        self.path = self.text = None
        if isinstance(net, (list, tuple)):
            self.text = cfg_from_layers(net).encode()
        elif isinstance(net, os.PathLike):
            self.path = _path_arg(net, "net")
        elif isinstance(net, (str, bytes)):
            s = net.decode("utf-8", "replace") if isinstance(net, bytes) \
                else net
            if "\n" in s or "[net]" in s or "[network]" in s:
                self.text = net.encode() if isinstance(net, str) else net
            else:
                self.path = _path_arg(net, "net")
        else:
            raise TypeError("net must be a .cfg path, .cfg text or a list "
                            "of layer dicts, not %s" % type(net).__name__)

    def shape(self):
        """(channels, height, width) of [net]; ValueError if it has none."""
        text = self.text
        if text is None:
            try:
                with open(self.path, "rb") as f:
                    text = f.read()
            except OSError as e:
                raise Error(EMBER_EIO, "%s: %s" % (
                    self.path.decode("utf-8", "replace"),
                    e.strerror or e)) from None
        shape = input_shape(text)
        if shape is None:
            raise ValueError("net: its [net] section must give height, "
                             "width and channels (needed to check the "
                             "arrays against it)")
        return shape


def _images(x, shape, what):
    """x as a C-contiguous float32 array (n, c*h*w): uint8 pixels scaled
    by 1/255, other numbers as they are."""
    a = np.asarray(x)
    if a.dtype.kind not in "uif":
        raise TypeError("%s images must be numbers, not dtype %s"
                        % (what, a.dtype))
    c, h, w = shape
    ok = {4: a.shape[1:] == (c, h, w),
          3: c == 1 and a.shape[1:] == (h, w),
          2: a.shape[1:] == (c * h * w,)}.get(a.ndim, False)
    if not ok:
        raise ValueError("%s images have shape %s; the network takes (n, %d, "
                         "%d, %d)%s or (n, %d)"
                         % (what, a.shape, c, h, w,
                            ", (n, %d, %d)" % (h, w) if c == 1 else "",
                            c * h * w))
    if a.shape[0] == 0:
        raise ValueError("%s: no images" % what)
    if a.dtype == np.uint8:
        out = a.astype(np.float32, order="C")
        out *= np.float32(1.0 / 255.0)
    else:
        out = np.ascontiguousarray(a, dtype=np.float32)
    return out.reshape(a.shape[0], c * h * w)


def _labels(y, n, what):
    """y as a C-contiguous uint8 array of n labels in 0..255."""
    b = np.asarray(y)
    if b.dtype.kind not in "iu":
        raise TypeError("%s labels must be integers, not dtype %s"
                        % (what, b.dtype))
    if b.ndim != 1:
        raise ValueError("%s labels must be 1-D, not of shape %s"
                         % (what, b.shape))
    if len(b) != n:
        raise ValueError("%s: %d images but %d labels" % (what, n, len(b)))
    lo, hi = int(b.min()), int(b.max())
    if lo < 0 or hi > 255:
        raise ValueError("%s labels must be in 0..255 (a class index), "
                         "found %d" % (what, lo if lo < 0 else hi))
    return np.ascontiguousarray(b, dtype=np.uint8)


def _pair(value, net, what):
    """(images, labels) checked and converted, or None."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError("%s must be a pair (images, labels); give an idx "
                        "directory as data=" % what)
    try:
        x, y = value
    except (TypeError, ValueError):
        raise TypeError("%s must be a pair (images, labels), not %s"
                        % (what, type(value).__name__)) from None
    images = _images(x, net.shape(), what)
    return images, _labels(y, images.shape[0], what)


def _params(net, train, test, *, data, epochs, batch, micro_batch, lr,
            momentum, decay, stages, platform, sync, seed, load, save,
            train_limit, test_limit, layers_only=False,
            fixed_splits=False):
    """An ember_train_params filled from the arguments, and what it points
    to (kept alive by the caller during the call). Every argument is
    checked before the library is called."""
    n = _Net(net)
    v = {}
    if n.path is not None:
        v["net_path"] = n.path
    else:
        v["net_text"], v["net_len"] = n.text, len(n.text)
    if data is not None:
        if train is not None or test is not None:
            raise ValueError("give the data as arrays (train=, test=) or as "
                             "an idx directory (data=), not both")
        v["data_dir"] = _path_arg(data, "data")
    tr = _pair(train, n, "train")
    te = _pair(test, n, "test")
    if tr is not None:
        v["train_images"], v["train_labels"] = (tr[0].ctypes.data,
                                                tr[1].ctypes.data)
        v["n_train"] = tr[0].shape[0]
    if te is not None:
        v["test_images"], v["test_labels"] = (te[0].ctypes.data,
                                              te[1].ctypes.data)
        v["n_test"] = te[0].shape[0]
    v["train_limit"] = _opt_int(train_limit, "train_limit", 1, _SIZE_MAX)
    v["test_limit"] = _opt_int(test_limit, "test_limit", 1, _SIZE_MAX)
    v["epochs"] = _int(epochs, "epochs", 0, _UINT_MAX)
    v["batch"] = _opt_int(batch, "batch")
    v["micro_batch"] = _opt_int(micro_batch, "micro_batch")
    v["learning_rate"] = _rate(lr, "lr")
    v["momentum"] = _rate(momentum, "momentum")
    v["decay"] = _rate(decay, "decay")
    v["stages"] = _int(stages, "stages", 1, _UINT_MAX)
    if platform is not None:
        v["platform"] = _text_arg(platform, "platform")
    v["sync"] = 1 if sync else 0
    v["layer_split_only"] = 1 if layers_only else 0
    v["fixed_splits"] = 1 if fixed_splits else 0
    v["seed"] = _int(seed, "seed", 0, (1 << 64) - 1)
    if load is not None:
        v["load_path"] = _path_arg(load, "load")
    if save is not None:
        v["save_path"] = _path_arg(save, "save")
    _need("ember_train_params_default")
    p = _lib.EmberTrainParams()
    lib.ember_train_params_default(ctypes.byref(p))
    p.size = ctypes.sizeof(p)
    for name, value in v.items():
        setattr(p, name, value)
    return p, [n, tr, te]


def _clients(handles):
    return (ctypes.c_void_p * len(handles))(*handles)


def epoch_dict(e):
    """An ember_train_epoch as the dict ember.train returns per epoch (as
    far as the library's size field covers it)."""
    d = _lib.struct_dict(e, skip=("n_stages", "stage_busy",
                                  "stage_platform"))
    d["test_accuracy"] = _nan_none(d["test_accuracy"])
    stages = []
    f = type(e).stage_platform
    if (e.size or ctypes.sizeof(e)) >= f.offset + f.size:
        for i in range(e.n_stages):
            stages.append({
                "platform": _lib.text(e.stage_platform[i])
                if e.stage_platform else "",
                "busy": e.stage_busy[i] if e.stage_busy else None})
    d["stages"] = stages
    return d


def run(handles, net, train=None, test=None, *, on_epoch=None,
        progress=None, **kw):
    """ember_train on the clients' handles: (epoch dicts, result dict).
    kw: _params' keywords."""
    if on_epoch is not None and not callable(on_epoch):
        raise TypeError("on_epoch must be callable")
    if progress is not None and not callable(progress):
        raise TypeError("progress must be callable")
    params, keep = _params(net, train, test, **kw)
    _need("ember_train")
    history, raised = [], []

    def c_epoch(ptr, _user):
        if raised:
            return 1
        try:
            d = epoch_dict(ptr.contents)
            history.append(d)
            if on_epoch is not None:
                go = on_epoch(dict(d, stages=[dict(s) for s in d["stages"]]))
                if go is not None and not go:
                    return 1
            return 0
        except BaseException as e:  # raised again once C returns
            raised.append(e)
            return 1

    def c_progress(done, total, _user):
        if raised:
            return
        try:
            progress(done, total)
        except BaseException as e:  # stops at the epoch's end, raised then
            raised.append(e)

    epoch_cb = _lib.TRAIN_EPOCH_CB(c_epoch)
    progress_cb = _lib.PROGRESS_CB(c_progress) if progress is not None \
        else _lib.PROGRESS_CB()
    params.epoch_cb = epoch_cb
    params.progress = progress_cb
    clients = _clients(handles)
    res = _lib.EmberTrainResult()
    res.size = ctypes.sizeof(res)
    keep += [epoch_cb, progress_cb, clients]
    rc = lib.ember_train(clients, len(handles), ctypes.byref(params),
                         ctypes.byref(res))
    del keep  # the call is over: what it read may go
    if raised:
        raise raised[0]
    try:
        check(rc)
    except Error as e:
        e.epochs = history  # the epochs done before it stopped
        raise
    result = _lib.struct_dict(res)
    result["test_accuracy"] = _nan_none(result["test_accuracy"])
    return history, result


def plan(handles, net, train=None, test=None, **kw):
    """ember_train_plan on the clients' handles: its text."""
    params, keep = _params(net, train, test, **kw)
    _need("ember_train_plan")
    clients = _clients(handles)
    out = ctypes.c_void_p()
    rc = lib.ember_train_plan(clients, len(handles), ctypes.byref(params),
                              ctypes.byref(out))
    del keep
    check(rc)
    try:
        return ctypes.string_at(out.value).decode("utf-8", "replace") \
            if out.value else ""
    finally:
        _lib.libc.free(out)
