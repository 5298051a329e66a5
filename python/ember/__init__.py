"""ember: Python binding of libember, the client library of the ember
accelerator service (client/include/ember/ember.h is the manual).

    import ember
    with ember.connect("embedded") as c:
        res = c.sw_align(["ACGTACGT"], ["TTACGTACGTTT"])
        print(res["score"][0], res[0])

    lnl = ember.lnl("primates.fasta", "primates.tree", "HKY{2}+F+G4{0.5}")

    hist = ember.train("lenet.cfg", (x, y), (x_test, y_test), epochs=2)

Built on the installed libember.so.0 through ctypes; set EMBER_LIBRARY to
a path to use another build of it. Errors raise ember.Error (.code is the
negative EMBER_E* value, .name its symbol); wrong argument types raise
TypeError or ValueError before anything reaches the library.
"""

from . import _lib
from ._cnn_cfg import cfg_from_layers, layers_from_cfg
from ._client import (Block, Client, Task, RESULT_DTYPE, EMBER_BLOCK_CACHE,
                      EMBER_BLOCK_BROADCAST, EMBER_BLOCK_STATE)
from .errors import *  # noqa: F401,F403  (Error, EMBER_E* constants)
from .errors import Error, CODES, EMBER_ECONNECT

__version__ = "0.1.0"  # the ember release this binding belongs to

EMBER_PROTOCOL_VERSION = 3
EMBER_DEFAULT_SOCKET = "/run/ember/nam.sock"


def version():
    """The linked libember's version (ember_version()), e.g. "0.1.0"."""
    return _lib.text(_lib.lib.ember_version())


def strerror(code):
    """The text of an EMBER_E* code (ember_strerror)."""
    return _lib.text(_lib.lib.ember_strerror(code))


def platform_kinds():
    """The NAM's platform kinds ("cpu", "opencl", "fpga-emu"): what the
    platform and prefer arguments accept."""
    out = []
    while True:
        k = _lib.lib.ember_platform_kind(len(out))
        if not k:
            return out
        out.append(_lib.text(k))


def connect(address=None, *, client_name=None, no_fallback=False, threads=0,
            plugin_dir=None, connect_timeout_ms=0, max_frame=0,
            reconnect_window_ms=0):
    """Open a client (ember_connect) and return an ember.Client, usable as
    a context manager.

    address: "unix:PATH", "tcp:HOST:PORT", "embedded", or None for the
    default ($EMBER_NAM, else unix:/run/ember/nam.sock if it exists, else
    embedded). A NAM that cannot be reached is not an error: the client
    starts in fallback and runs tasks on the CPU in-process, unless
    no_fallback=True (then ember.Error EMBER_ECONNECT). client_name: shown
    in the NAM's logs; threads: workers of the embedded engine or the CPU
    fallback (0: one per core); plugin_dir: accelerator plugins for the
    in-process engine (refused ones are named in Client.connect_warnings);
    connect_timeout_ms (0: 2000), max_frame (0: 64 MiB) and
    reconnect_window_ms (how long tasks that cannot run in-process wait for
    a restarted NAM; 0: $EMBER_RECONNECT_WINDOW_MS or 10 s, negative: off)
    as in ember_options.
    """
    return Client(address, client_name=client_name, no_fallback=no_fallback,
                  threads=threads, plugin_dir=plugin_dir,
                  connect_timeout_ms=connect_timeout_ms, max_frame=max_frame,
                  reconnect_window_ms=reconnect_window_ms)


def lnl(alignment, trees, model=None, *, type=None, rates=None,
        site_lnl=False, precision="double", max_vectors=None, threads=None,
        instances=None, platform=None, address=None, report=False,
        progress=None):
    """Log-likelihoods of fixed trees on the plf accelerator, as
    Client.lnl (its docstring has the arguments and the result), on a
    client opened for the call: address as for connect() (None: the
    default). A NAM that cannot be reached leaves the work to the embedded
    engine, as `ember lnl` does, unless platform asks for a kind other
    than "cpu" (then ember.Error EMBER_ECONNECT).

        lnl = ember.lnl({"a": "ACGT", "b": "ACGA", "c": "ACCA"},
                        "(a:0.1,b:0.2,c:0.3);", "JC")
        lnl, site = ember.lnl("aln.phy", "trees.nwk", "GTR+G4",
                              site_lnl=True)
    """
    kw = dict(type=type, rates=rates, site_lnl=site_lnl,
              precision=precision, max_vectors=max_vectors, threads=threads,
              instances=instances, platform=platform, report=report,
              progress=progress)
    with Client(address, client_name="python ember.lnl") as c:
        if c.address == "embedded" or c.connected:
            return c.lnl(alignment, trees, model, **kw)
        why = c.connect_warnings
    if platform is not None and platform != "cpu":
        raise Error(EMBER_ECONNECT, "the NAM cannot be reached%s;"
                    " platform %s needs it" % (": " + why if why else "",
                                               platform))
    with Client("embedded", client_name="python ember.lnl") as c:
        return c.lnl(alignment, trees, model, **kw)


def _on_client(address, platform, name, call):
    """call(client) on a client opened for it, as ember.lnl does: address
    as for connect(); a NAM that cannot be reached leaves the work to the
    embedded engine (tasks on state blocks never fall back) unless
    platform asks for a kind other than "cpu" (then EMBER_ECONNECT)."""
    with Client(address, client_name=name) as c:
        if c.address == "embedded" or c.connected:
            return call(c)
        why = c.connect_warnings
    if platform is not None and platform != "cpu":
        raise Error(EMBER_ECONNECT, "the NAM cannot be reached%s;"
                    " platform %s needs it" % (": " + why if why else "",
                                               platform))
    with Client("embedded", client_name=name) as c:
        return call(c)


def train(net, train=None, test=None, *, data=None, epochs=1, batch=None,
          micro_batch=None, lr=None, momentum=None, decay=None, stages=1,
          platform=None, sync=False, seed=1, load=None, save=None,
          train_limit=None, test_limit=None, layers_only=False,
          fixed_splits=False, on_epoch=None, progress=None, address=None):
    """Train a convolutional network on the cnn accelerator, as
    Client.train (its docstring has the arguments and the result: a list
    of one dict per epoch), on a client opened for the call: address as
    for connect() (None: the default). A NAM that cannot be reached leaves
    the work to the embedded engine, as ember.lnl does, unless platform
    asks for a kind other than "cpu" (then ember.Error EMBER_ECONNECT).

        hist = ember.train("accelerators/cnn/nets/lenet.cfg", (x, y),
                           (x_test, y_test), epochs=2, batch=20,
                           save="lenet.weights",
                           on_epoch=lambda e: print(e["epoch"], e["loss"]))
        hist = ember.train([{"type": "net", "height": 28, "width": 28,
                             "channels": 1, "batch": 32},
                            {"type": "connected", "output": 10,
                             "activation": "linear"},
                            {"type": "softmax"}],
                           data="/usr/share/datasets/fashion-mnist",
                           train_limit=1000)
    """
    kw = dict(data=data, epochs=epochs, batch=batch, micro_batch=micro_batch,
              lr=lr, momentum=momentum, decay=decay, stages=stages,
              platform=platform, sync=sync, seed=seed, load=load, save=save,
              train_limit=train_limit, test_limit=test_limit,
              layers_only=layers_only, fixed_splits=fixed_splits,
              on_epoch=on_epoch, progress=progress)
    return _on_client(address, platform, "python ember.train",
                      lambda c: c.train(net, train, test, **kw))


def evaluate(net, test=None, load=None, *, data=None, batch=None,
             micro_batch=None, stages=1, platform=None, seed=1,
             test_limit=None, progress=None, address=None):
    """The test accuracy (a float) of a network's weights file, as
    Client.evaluate, on a client opened for the call (address as for
    ember.train).

        acc = ember.evaluate("lenet.cfg", (x_test, y_test),
                             load="lenet.weights")
    """
    kw = dict(data=data, batch=batch, micro_batch=micro_batch, stages=stages,
              platform=platform, seed=seed, test_limit=test_limit,
              progress=progress)
    return _on_client(address, platform, "python ember.evaluate",
                      lambda c: c.evaluate(net, test, load, **kw))


def train_plan(net, *, stages=1, platform=None, batch=None, micro_batch=None,
               sync=False, layers_only=False, fixed_splits=False,
               address=None):
    """The plan ember.train would follow, as text (Client.train_plan), on
    a client opened for the call (address as for ember.train).

        print(ember.train_plan("lenet.cfg", stages=3))
    """
    kw = dict(stages=stages, platform=platform, batch=batch,
              micro_batch=micro_batch, sync=sync, layers_only=layers_only,
              fixed_splits=fixed_splits)
    return _on_client(address, platform, "python ember.train_plan",
                      lambda c: c.train_plan(net, **kw))


__all__ = ["connect", "version", "lnl", "train", "evaluate", "train_plan",
           "cfg_from_layers", "layers_from_cfg", "strerror", "platform_kinds",
           "Client", "Block", "Task", "Error", "RESULT_DTYPE",
           "EMBER_BLOCK_CACHE", "EMBER_BLOCK_BROADCAST", "EMBER_BLOCK_STATE",
           "CODES", "EMBER_PROTOCOL_VERSION", "EMBER_DEFAULT_SOCKET",
           "__version__"] + \
    ["EMBER_" + name for name, _ in CODES] + ["EMBER_OK"]
