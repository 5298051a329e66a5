"""Client, Block and Task: thin owners of libember's handles.

Ownership follows ember.h: a Client owns its blocks and tasks; closing it
releases the blocks and frees the tasks still alive, then closes the C
client. A Block or Task that is garbage collected releases or frees its
handle on its own. Calls that block in C (task waits, sw_align, reads)
run without the GIL (ctypes drops it), so other Python threads go on.
"""

import ctypes
import operator
import os
import threading
import time
import weakref

import numpy as np

from . import _lib, _lnl, _train
from ._lib import lib
from .errors import Error, check

# ember_block_flags.h
EMBER_BLOCK_CACHE = 0x1
EMBER_BLOCK_BROADCAST = 0x2
EMBER_BLOCK_STATE = 0x4

# One pair's answer, laid out as ember_sw_result (five int32).
RESULT_DTYPE = np.dtype([("score", np.int32), ("query_start", np.int32),
                         ("query_end", np.int32), ("ref_start", np.int32),
                         ("ref_end", np.int32)])
# ember_seq: residues pointer, length (size_t)
_SEQ_DTYPE = np.dtype([("residues", np.uintp), ("length", np.uintp)])

_WAIT_SLICE_MS = 200  # waits are cut in slices so Ctrl-C gets through


def _cstr(value, what):
    """An optional str (or os.PathLike) argument as bytes for C."""
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        raise TypeError("%s must be a str or None, not %s"
                        % (what, type(value).__name__))
    if "\0" in value:
        raise ValueError("%s contains a NUL character" % what)
    return value.encode()


def _int(value, what, lo=None, hi=None):
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an int, not %s"
                        % (what, type(value).__name__)) from None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError("%s is %d, out of range [%s, %s]" % (what, v, lo, hi))
    return v


_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


def _as_bytes_view(data):
    """A C-contiguous uint8 numpy view of a bytes-like object or a numpy
    array (copied only when not contiguous); TypeError for anything else."""
    if isinstance(data, np.ndarray):
        if data.dtype.hasobject:
            raise TypeError("block data: a numpy array of Python objects "
                            "has no bytes to send")
        a = np.ascontiguousarray(data)
        return a.reshape(-1).view(np.uint8) if a.size else \
            np.empty(0, np.uint8)
    if isinstance(data, str):
        raise TypeError("block data must be bytes-like or a numpy array, "
                        "not str (encode it)")
    try:
        mv = memoryview(data)
    except TypeError:
        raise TypeError("block data must be bytes-like or a numpy array, "
                        "not %s" % type(data).__name__) from None
    if mv.nbytes == 0:
        return np.empty(0, np.uint8)
    if not mv.c_contiguous:
        return np.frombuffer(mv.tobytes(), np.uint8)
    return np.frombuffer(mv.cast("B") if mv.format != "B" or mv.ndim != 1
                         else mv, np.uint8)


def _seq_table(seqs, what):
    """Sequences (str, bytes, or a 1-D numpy array of strings) as one
    buffer and an ember_seq table pointing into it; both must stay alive
    while C reads them."""
    if isinstance(seqs, (str, bytes, bytearray)):
        raise TypeError("%s must be a sequence of sequences, not one %s"
                        % (what, type(seqs).__name__))
    if isinstance(seqs, np.ndarray):
        if seqs.dtype.kind not in "SUO" or seqs.ndim != 1:
            raise TypeError("%s: a numpy array must be 1-D of strings "
                            "(dtype S, U or object), not %s%s"
                            % (what, seqs.ndim, seqs.dtype))
        seqs = seqs.tolist()
    try:
        items = list(seqs)
    except TypeError:
        raise TypeError("%s must be a sequence of str or bytes, not %s"
                        % (what, type(seqs).__name__)) from None
    for i, s in enumerate(items):
        if isinstance(s, str):
            try:
                items[i] = s.encode("ascii")
            except UnicodeEncodeError:
                raise ValueError("%s[%d] has a non-ASCII character"
                                 % (what, i)) from None
        elif isinstance(s, (bytes, bytearray, memoryview)):
            items[i] = bytes(s)
        else:
            raise TypeError("%s[%d] must be str or bytes, not %s"
                            % (what, i, type(s).__name__))
    buf = b"".join(items)
    store = np.frombuffer(buf, np.uint8) if buf else np.zeros(1, np.uint8)
    lengths = np.fromiter(map(len, items), dtype=np.uintp, count=len(items))
    table = np.empty(len(items), _SEQ_DTYPE)
    table["length"] = lengths
    table["residues"] = store.ctypes.data + (np.cumsum(lengths) - lengths)
    return store, table


class Block:
    """A block of bytes handed to ember: a task input, an out block a task
    made (Task.outputs) or a state block (state=True).

    Made by Client.block() (sealed) or Client.alloc_block() (fill .buffer,
    then seal()). Release it with release() or a with-block; it is released
    when garbage collected too. The NAM frees it once no task uses it.
    """

    def __init__(self, client, handle, flags, kind, buf=None):
        self._client = client
        self._h = handle
        self.flags = flags
        self.kind = kind           # "input", "out" or "state"
        self._buf = buf            # unsealed: (ctypes array, memoryview)
        self.version = None        # a state block's version at the last
                                   # read, sync or restore
        client._blocks.add(self)

    def _handle(self):
        if self._h is None or self._client._h is None:
            raise ValueError("block is released (or its client closed)")
        return self._h

    @property
    def size(self):
        """The block's size in bytes (an out block: 0 until its task
        succeeded)."""
        return lib.ember_block_size(self._handle())

    @property
    def sealed(self):
        """False for a block from alloc_block() until seal()."""
        return self._buf is None

    @property
    def buffer(self):
        """The writable memory of a block from alloc_block() until seal():
        a memoryview (wrap it with numpy.frombuffer to fill it as an array).
        seal() invalidates this memoryview; views made from it must not be
        written after seal() (the memory may then be mapped read-only, or
        already be in the NAM's hands)."""
        if self._buf is None:
            raise ValueError("block is sealed: its memory is read-only")
        return self._buf[1]

    def seal(self):
        """Make a block from alloc_block() immutable and hand it over."""
        h = self._handle()
        if self._buf is None:
            raise ValueError("block is already sealed")
        # the memoryview handed out is invalidated; views made from it
        # (numpy.frombuffer) cannot be, and must not be written to any more
        self._buf[1].release()
        self._buf = None
        check(lib.ember_block_seal(h))

    def read(self, *, version=False):
        """The block's current bytes (ember_block_read): an input block's
        own bytes, an out block's once its task succeeded, a state block's
        latest version. With version=True, returns (bytes, version); the
        version is a state block's number of updates (0 for others)."""
        h = self._handle()
        data = ctypes.c_void_p()
        size = ctypes.c_size_t()
        ver = ctypes.c_uint64()
        check(lib.ember_block_read(h, ctypes.byref(data), ctypes.byref(size),
                                   ctypes.byref(ver)))
        try:
            out = ctypes.string_at(data.value, size.value) if size.value \
                else b""
        finally:
            _lib.libc.free(data)
        if self.kind == "state":
            self.version = ver.value
        return (out, ver.value) if version else out

    def sync(self):
        """State blocks: make the NAM keep a host copy of the current
        version (what restore() goes back to); returns that version."""
        ver = ctypes.c_uint64()
        check(lib.ember_block_sync(self._handle(), ctypes.byref(ver)))
        self.version = ver.value
        return ver.value

    def restore(self):
        """State blocks: go back to the last synced version (or the first
        bytes) after a failure (EMBER_ESTATE); returns that version.
        Raises EMBER_EBUSY while a task that names the block is queued or
        running: wait for them first."""
        ver = ctypes.c_uint64()
        check(lib.ember_block_restore(self._handle(), ctypes.byref(ver)))
        self.version = ver.value
        return ver.value

    def release(self):
        """Drop this reference; idempotent."""
        h, self._h = self._h, None
        if self._buf is not None:
            try:
                self._buf[1].release()
            except BufferError:
                pass
            self._buf = None
        if h is not None and self._client._h is not None:
            lib.ember_block_release(h)
        self._client._blocks.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass

    def __repr__(self):
        if self._h is None:
            return "<ember.Block released>"
        return "<ember.Block %s %d bytes%s>" % (
            self.kind, self.size, "" if self.sealed else " unsealed")


class Task:
    """A submitted task (Client.submit). Freed by free(), a with-block, its
    client's close() or garbage collection; a task still running is
    canceled then. Its out blocks (outputs) live on after the task."""

    def __init__(self, client, handle, inputs, states, outputs):
        self._client = client
        self._h = handle
        self._inputs = inputs      # kept alive while the task may read them
        self._states = states
        self.outputs = outputs     # Blocks the task makes (out blocks)
        client._tasks.add(self)

    def _handle(self):
        if self._h is None or self._client._h is None:
            raise ValueError("task is freed (or its client closed)")
        return self._h

    def wait(self, timeout=None):
        """Wait until the task is done; timeout in seconds (None: forever).
        Returns True when done, False when the timeout passed first."""
        h = self._handle()
        if timeout is None:
            while lib.ember_task_wait(h, _WAIT_SLICE_MS) != 0:
                pass
            return True
        if not isinstance(timeout, (int, float)):
            raise TypeError("timeout must be a number of seconds or None")
        if not timeout >= 0:
            raise ValueError("timeout must be >= 0 or None")
        deadline = time.monotonic() + timeout
        while True:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if lib.ember_task_wait(h, max(0, min(left_ms,
                                                 _WAIT_SLICE_MS))) == 0:
                return True
            if left_ms <= _WAIT_SLICE_MS:
                return False

    @property
    def done(self):
        """True once the task has finished; never blocks."""
        return bool(lib.ember_task_done(self._handle()))

    @property
    def status(self):
        """0 if the task succeeded, else its EMBER_E* code (meaningful once
        done)."""
        return lib.ember_task_status(self._handle())

    @property
    def message(self):
        """Detail text of a failed task ("" on success)."""
        return _lib.text(lib.ember_task_message(self._handle()))

    @property
    def error(self):
        """An ember.Error for a failed task, None if done and successful or
        not done yet."""
        h = self._handle()
        if not lib.ember_task_done(h) or lib.ember_task_status(h) == 0:
            return None
        return Error(lib.ember_task_status(h), self.message)

    def raise_for_status(self):
        """Raise the task's ember.Error if it failed; returns the task."""
        err = self.error
        if err is not None:
            raise err
        return self

    @property
    def output(self):
        """The accelerator's packed Result message as bytes (None until
        done)."""
        size = ctypes.c_size_t()
        p = lib.ember_task_output(self._handle(), ctypes.byref(size))
        if not p:
            return None
        return ctypes.string_at(p, size.value) if size.value else b""

    @property
    def info(self):
        """Where and how the task ran (ember_task_info) as a dict: platform,
        platform_kind, fell_back, queue_ns, exec_ns, server_ns,
        round_trip_ns, stage_in_ns, stage_out_ns, attempts."""
        p = lib.ember_task_get_info(self._handle())
        d = _lib.struct_dict(p.contents)
        d["fell_back"] = bool(d["fell_back"])
        return d

    def cancel(self):
        """Ask for cancellation: the task then completes with
        EMBER_ECANCELED unless its result was already on its way."""
        check(lib.ember_task_cancel(self._handle()))

    def free(self):
        """Free the task (canceling it if still running); idempotent. Never
        call it while another thread waits on the task."""
        h, self._h = self._h, None
        if h is not None and self._client._h is not None:
            lib.ember_task_free(h)
        self._inputs = self._states = None
        self._client._tasks.discard(self)

    close = free

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass

    def __repr__(self):
        if self._h is None:
            return "<ember.Task freed>"
        if not self.done:
            return "<ember.Task running>"
        return "<ember.Task done status=%d>" % self.status


class Client:
    """A libember client (ember_connect); see ember.connect(). One client
    may be shared by threads. Use it as a context manager, or close() it."""

    def __init__(self, address=None, *, client_name=None, no_fallback=False,
                 threads=0, plugin_dir=None, connect_timeout_ms=0,
                 max_frame=0, reconnect_window_ms=0):
        addr = _cstr(address, "address")
        opts = _lib.EmberOptions()
        opts.size = ctypes.sizeof(opts)
        opts.client_name = _cstr(client_name, "client_name")
        opts.embedded_threads = _int(threads, "threads", 0, (1 << 32) - 1)
        opts.connect_timeout_ms = _int(connect_timeout_ms,
                                       "connect_timeout_ms", 0, _INT_MAX)
        opts.no_fallback = 1 if no_fallback else 0
        opts.max_frame = _int(max_frame, "max_frame", 0)
        opts.plugin_dir = _cstr(plugin_dir, "plugin_dir")
        opts.reconnect_window_ms = _int(reconnect_window_ms,
                                        "reconnect_window_ms", -1, _INT_MAX)
        self._h = None
        self._blocks = weakref.WeakSet()
        self._tasks = weakref.WeakSet()
        self._lock = threading.Lock()
        h = ctypes.c_void_p()
        check(lib.ember_connect(addr, ctypes.byref(opts), ctypes.byref(h)))
        self._h = h.value
        # what ember_connect said without failing: refused plugins (their
        # reasons), or why the NAM could not be reached (fallback); "" if
        # nothing
        self.connect_warnings = _lib.text(lib.ember_last_error())

    def _handle(self):
        if self._h is None:
            raise ValueError("client is closed")
        return self._h

    def close(self):
        """Free the tasks and release the blocks still alive, then close
        the client; idempotent."""
        with self._lock:
            if self._h is None:
                return
            for t in list(self._tasks):
                t.free()
            for b in list(self._blocks):
                b.release()
            h, self._h = self._h, None
        lib.ember_close(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        if self._h is None:
            return "<ember.Client closed>"
        return "<ember.Client %s%s>" % (
            self.address, " connected" if self.connected else "")

    @property
    def closed(self):
        """True once close() ran."""
        return self._h is None

    @property
    def address(self):
        """The address after defaults ("embedded", "unix:/run/...")."""
        return _lib.text(lib.ember_client_address(self._handle()))

    @property
    def connected(self):
        """True while the client talks to a NAM (False: embedded or in
        fallback)."""
        return bool(lib.ember_is_connected(self._handle()))

    # -- blocks ----------------------------------------------------------

    @staticmethod
    def _flags(cache, broadcast, state):
        return ((EMBER_BLOCK_CACHE if cache else 0) |
                (EMBER_BLOCK_BROADCAST if broadcast else 0) |
                (EMBER_BLOCK_STATE if state else 0))

    def _alloc(self, size, flags):
        data = ctypes.c_void_p()
        h = ctypes.c_void_p()
        check(lib.ember_block_alloc(self._handle(), size, flags,
                                    ctypes.byref(data), ctypes.byref(h)))
        return data.value, h.value

    def block(self, data, *, cache=False, broadcast=False, state=False):
        """A sealed block holding data (bytes, bytearray, memoryview or a
        numpy array, its raw bytes in C order). The bytes are written once,
        straight into the memory ember_block_alloc gives (over a unix socket
        the memfd the NAM maps). cache: keep on the platform after its
        task; broadcast: for the client's lifetime; state: a state block
        whose first version is data."""
        src = _as_bytes_view(data)
        flags = self._flags(cache, broadcast, state)
        ptr, h = self._alloc(src.nbytes, flags)
        try:
            if src.nbytes:
                ctypes.memmove(ptr, src.ctypes.data, src.nbytes)
            check(lib.ember_block_seal(h))
        except BaseException:
            lib.ember_block_release(h)
            raise
        return Block(self, h, flags, "state" if state else "input")

    def alloc_block(self, size, *, cache=False, broadcast=False, state=False):
        """An unsealed block of size bytes: fill block.buffer (e.g. through
        numpy.frombuffer(block.buffer, dtype)), then call block.seal() and
        drop the views (never write through them after the seal). No copy
        at all: over a unix socket the memory is the memfd the NAM maps."""
        size = _int(size, "size", 0)
        flags = self._flags(cache, broadcast, state)
        ptr, h = self._alloc(size, flags)
        arr = (ctypes.c_char * size).from_address(ptr) if size else \
            (ctypes.c_char * 0)()
        return Block(self, h, flags, "state" if state else "input",
                     buf=(arr, memoryview(arr).cast("B")))

    # -- tasks -----------------------------------------------------------

    def _block_array(self, blocks, what):
        if isinstance(blocks, Block):
            raise TypeError("%s must be a list of Blocks, not one Block"
                            % what)
        blocks = list(blocks)
        for i, b in enumerate(blocks):
            if not isinstance(b, Block):
                raise TypeError("%s[%d] must be an ember.Block, not %s"
                                % (what, i, type(b).__name__))
            if b._client is not self:
                raise ValueError("%s[%d] belongs to another client"
                                 % (what, i))
            if not b.sealed:
                raise ValueError("%s[%d] is not sealed" % (what, i))
            b._handle()
        arr = (ctypes.c_void_p * max(len(blocks), 1))(
            *[b._h for b in blocks])
        return blocks, arr

    def submit(self, accelerator, params=b"", inputs=(), *, priority=0,
               platform=None, prefer=None, states=(), n_outputs=0):
        """Submit a task (ember_submit) and return its Task at once.

        accelerator: its name ("sw"); params: its packed Params message
        (bytes-like, may be empty for the defaults); inputs: Blocks in the
        order the accelerator expects; priority: higher runs first;
        platform: require a platform kind ("cpu", "opencl", "fpga-emu");
        prefer: prefer one; states: state Blocks the task updates in place;
        n_outputs: out blocks the task makes (Task.outputs).

        Invalid parameters or inputs show in the task's status, not here.
        """
        h = self._handle()
        if not isinstance(accelerator, str):
            raise TypeError("accelerator must be a str, not %s"
                            % type(accelerator).__name__)
        acc = _cstr(accelerator, "accelerator")
        if isinstance(params, str):
            raise TypeError("params must be bytes (a packed message), "
                            "not str")
        try:
            pbytes = bytes(memoryview(params))
        except TypeError:
            raise TypeError("params must be bytes-like, not %s"
                            % type(params).__name__) from None
        ins, in_arr = self._block_array(inputs, "inputs")
        sts, st_arr = self._block_array(states, "states")
        n_outputs = _int(n_outputs, "n_outputs", 0, 1 << 20)
        opts = _lib.EmberSubmitOptions()
        opts.size = ctypes.sizeof(opts)
        opts.priority = _int(priority, "priority", _INT_MIN, _INT_MAX)
        opts.platform = _cstr(platform, "platform")
        opts.prefer = _cstr(prefer, "prefer")
        opts.states = ctypes.cast(st_arr, ctypes.POINTER(ctypes.c_void_p))
        opts.n_states = len(sts)
        out_arr = (ctypes.c_void_p * max(n_outputs, 1))()
        opts.outputs = ctypes.cast(out_arr, ctypes.POINTER(ctypes.c_void_p))
        opts.n_outputs = n_outputs
        t = ctypes.c_void_p()
        check(lib.ember_submit(h, acc, pbytes, len(pbytes),
                               ctypes.cast(in_arr,
                                           ctypes.POINTER(ctypes.c_void_p)),
                               len(ins), ctypes.byref(opts), ctypes.byref(t)))
        outs = [Block(self, out_arr[i], 0, "out") for i in range(n_outputs)]
        return Task(self, t.value, ins, sts, outs)

    def run(self, accelerator, params=b"", inputs=(), **kw):
        """submit() and wait; returns the finished Task, or raises
        ember.Error (the task's status and message) when it failed."""
        task = self.submit(accelerator, params, inputs, **kw)
        try:
            task.wait()
            task.raise_for_status()
        except BaseException:
            for b in task.outputs:
                b.release()
            task.free()
            raise
        return task

    # -- sw --------------------------------------------------------------

    def sw_align(self, queries, refs, *, protein=False, match=3,
                 mismatch=-3, matrix=None, gap_open=6, gap_extend=1,
                 platform=None, prefer=None, pairs_per_task=0, report=False,
                 progress=None):
        """Smith-Waterman local alignment of queries[i] with refs[i]
        (ember_sw_align), batched into concurrent tasks.

        queries, refs: equally long sequences of str or bytes (residue
        letters), or 1-D numpy arrays of strings. DNA scores match/mismatch
        (A, C, G, T in any case; other IUPAC letters score 0); protein=True
        uses matrix (BLOSUM45/50/62/80, PAM250 or a path to an NCBI-format
        file; None: BLOSUM62). A gap of length k costs
        gap_open + (k-1) * gap_extend. platform/prefer: a platform kind
        ("cpu", "opencl", "fpga-emu") to require or prefer.
        progress: called as progress(done, total) on this thread.

        Returns a numpy structured array of len(queries) records with the
        int32 fields score, query_start, query_end, ref_start, ref_end
        (ember_sw_result: 0-based inclusive coordinates, all -1 when the
        score is 0). With report=True returns (results, report) where
        report is a dict of ember_sw_report (tasks, tasks_fallback,
        tasks_cpu, tasks_opencl, tasks_fpga_emu, tasks_retried, cells,
        queue_ns, exec_ns, server_ns, round_trip_ns, wall_ns).

        Raises ember.Error (EMBER_EPARAM for bad parameters or residues,
        with the detail naming the pair), TypeError or ValueError.
        """
        h = self._handle()
        qstore, qtab = _seq_table(queries, "queries")
        rstore, rtab = _seq_table(refs, "refs")
        n = len(qtab)
        if len(rtab) != n:
            raise ValueError("queries and refs differ in length: %d and %d"
                             % (n, len(rtab)))
        p = _lib.EmberSwParams()
        lib.ember_sw_params_default(ctypes.byref(p))
        p.size = ctypes.sizeof(p)
        p.alphabet = _lib.EMBER_SW_PROTEIN if protein else _lib.EMBER_SW_DNA
        p.match = _int(match, "match", _INT_MIN, _INT_MAX)
        p.mismatch = _int(mismatch, "mismatch", _INT_MIN, _INT_MAX)
        if matrix is not None and not protein:
            raise ValueError("matrix is for protein=True")
        p.matrix = _cstr(matrix, "matrix")
        p.gap_open = _int(gap_open, "gap_open", _INT_MIN, _INT_MAX)
        p.gap_extend = _int(gap_extend, "gap_extend", _INT_MIN, _INT_MAX)
        p.platform = _cstr(platform, "platform")
        p.prefer = _cstr(prefer, "prefer")
        p.pairs_per_task = _int(pairs_per_task, "pairs_per_task", 0)
        if progress is not None and not callable(progress):
            raise TypeError("progress must be callable")
        results = np.zeros(n, RESULT_DTYPE)
        rep = _lib.EmberSwReport()
        rep.size = ctypes.sizeof(rep)
        if n == 0:
            return (results, _lib.struct_dict(rep)) if report else results
        raised = []

        def on_progress(done, total, _user):
            if raised:
                return
            try:
                progress(done, total)
            except BaseException as e:  # re-raised once C returns
                raised.append(e)

        cb = _lib.PROGRESS_CB(on_progress) if progress else _lib.PROGRESS_CB()
        rc = lib.ember_sw_align(h, ctypes.byref(p), qtab.ctypes.data,
                                rtab.ctypes.data, n, results.ctypes.data,
                                ctypes.byref(rep), cb, None)
        check(rc)
        del qstore, rstore  # held until here: C read the residues in them
        if raised:
            raise raised[0]
        return (results, _lib.struct_dict(rep)) if report else results

    def lnl(self, alignment, trees, model=None, *, type=None, rates=None,
            site_lnl=False, precision="double", max_vectors=None,
            threads=None, instances=None, platform=None, report=False,
            progress=None):
        """Log-likelihoods of fixed trees (ember_lnl): every tree scored for
        the alignment under one substitution model on the plf accelerator
        (branch lengths and parameters as given, nothing optimised).

        alignment: a path (PHYLIP, FASTA or NEXUS, plain or gzip'd), a dict
        name -> sequence, or a list of (name, sequence) pairs. type: "dna",
        "protein" or None (detected from the letters).
        trees: a path (an os.PathLike, or a str not starting with "("), one
        Newick string, or a list of them; each tree holds every taxon once,
        every branch with its length.
        model: IQ-TREE syntax ("JC", "HKY{2}+F+G4{0.5}", "LG+I{0.1}", ...);
        rates: a PAML rate file as the protein matrix, model then only its
        modifiers ("+G4{0.5}") or None.
        precision: "double" or "single"; max_vectors: partials buffers for
        ancestral vectors (None: the fewest that recompute nothing);
        threads: CPU threads per task, over patterns (None: 1); instances:
        instances scoring trees at once, over trees, each with its own
        buffers (None: 1); platform: require a
        platform kind ("cpu", "opencl", "fpga-emu"). progress: called as
        progress(done, total) on this thread after each batch of trees.

        Returns a float64 numpy array of the trees' log-likelihoods; with
        site_lnl=True a tuple (lnl, site) where site has shape (trees,
        sites), each site's log-likelihood (a row sums to its lnl); with
        report=True the ember_lnl_report as a dict is appended (a tuple).

        Raises ember.Error (EMBER_EPARAM for a bad model or tree, with the
        detail naming it: "newick[2]: taxon 'Toad' is not in the
        alignment"; EMBER_EFORMAT or EMBER_EIO for files, "path:line:
        reason"), TypeError or ValueError. Tasks on state never fall back:
        a client in fallback fails (EMBER_ESTATE); ember.lnl handles that.
        """
        return _lnl.score(self._handle(), alignment, trees, model, type=type,
                          rates=rates, site_lnl=site_lnl, precision=precision,
                          max_vectors=max_vectors, threads=threads,
                          instances=instances, platform=platform,
                          report=report, progress=progress)

    # -- CNN training ----------------------------------------------------

    def train(self, net, train=None, test=None, *, data=None, epochs=1,
              batch=None, micro_batch=None, lr=None, momentum=None,
              decay=None, stages=1, platform=None, sync=False, seed=1,
              load=None, save=None, train_limit=None, test_limit=None,
              layers_only=False, fixed_splits=False, on_epoch=None,
              progress=None):
        """Train a convolutional network on the cnn accelerator
        (ember_train): SGD on a softmax cross-entropy loss, the network
        split into `stages` stages of balanced work driven as a pipeline.

        net: a darknet .cfg: a path (an os.PathLike, or a str without
        "[net]" or a newline), its text, or a list of layer dicts (see
        ember.cfg_from_layers): [net] (height, width, channels, batch,
        learning_rate, momentum, decay), [convolutional], [maxpool],
        [connected], [softmax].
        train, test: (images, labels) pairs of numpy arrays (test may be
        None: no test pass). images: shape (n, c, h, w), (n, h, w) when
        c is 1, or (n, c*h*w), matching the [net] section; uint8 pixels are
        scaled by 1/255, other numbers taken as they are (float32, C
        order). labels: n integers in 0..255 (each below the network's
        classes). Or data: an idx directory (MNIST's file names, plain or
        .gz) instead of both.
        epochs: epochs to train; batch: samples per update (None: the
        .cfg's); micro_batch: samples per task, dividing batch (None: the
        largest divisor of batch up to 16); lr, momentum, decay: None for
        the .cfg's; stages: pipeline stages; platform: the kind every
        stage runs on ("cpu", "opencl", "fpga-emu"; None: any); sync: each
        stage updates before the next mini-batch (the result equals one
        stage's, bit for bit with layers_only) instead of FPDeep's
        pipelined updates; seed: initial
        weights and the shuffle; load: a weights file to start from (what
        save wrote; epochs go on from its count); save: a weights file
        written after each epoch; train_limit, test_limit: use the first
        N samples; layers_only: stages of whole layers (no channel
        slices; with sync, bit for bit what one stage computes);
        fixed_splits: each layer cut by input channels (ICP; by output
        channels, OCP, only for a layer with fewer input channels than
        stages), not by whichever balances the stages better.
        on_epoch: called after each epoch with its dict (below); returning
        False stops training, and ember.Error EMBER_ECANCELED is raised.
        progress: called as progress(done, total) with the epoch's samples.

        Returns a list with one dict per epoch: epoch (1-based, counting a
        loaded file's), epochs, loss (mean training loss), train_accuracy,
        test_accuracy (None without test data), seconds, images_per_second
        and stages (a list of {"platform": name, "busy": share of the
        epoch spent running its tasks}).

            hist = client.train("lenet.cfg", (x, y), (x_test, y_test),
                                epochs=2, batch=20, save="lenet.weights")
            print(hist[-1]["loss"], hist[-1]["test_accuracy"])

        Raises ember.Error (EMBER_EPARAM: a .cfg that does not parse, with
        file:line, data that does not match the network, more stages than
        layers; EMBER_EFORMAT: a broken idx or weights file;
        EMBER_ENOPLATFORM; EMBER_ECANCELED), with .epochs the dicts of the
        epochs done; TypeError or ValueError for arguments refused before
        the call (labels that are not integers in 0..255, images that do
        not match the [net] shape or the labels' count). What on_epoch or
        progress raises stops training and is raised again. Training runs
        on state blocks, which never fall back: a client in fallback fails
        (EMBER_ESTATE); ember.train handles that.
        """
        if train is None and data is None and epochs:
            raise ValueError("train: give (images, labels) or an idx "
                             "directory as data=")
        history, _ = _train.run(
            [self._handle()], net, train, test, on_epoch=on_epoch,
            progress=progress, data=data, epochs=epochs, batch=batch,
            micro_batch=micro_batch, lr=lr, momentum=momentum, decay=decay,
            stages=stages, platform=platform, sync=sync, seed=seed,
            load=load, save=save, train_limit=train_limit,
            test_limit=test_limit, layers_only=layers_only,
            fixed_splits=fixed_splits)
        return history

    def evaluate(self, net, test=None, load=None, *, data=None, batch=None,
                 micro_batch=None, stages=1, platform=None, seed=1,
                 test_limit=None, progress=None):
        """The test accuracy of a network's weights (ember_train with no
        epochs): the share of the test samples it predicts right, a float.

        net, test (an (images, labels) pair), data, batch, micro_batch,
        stages, platform, test_limit and progress as in train(); load: the
        weights file (what train's save= wrote; None: the weights seed
        makes).

            acc = client.evaluate("lenet.cfg", (x_test, y_test),
                                  load="lenet.weights")
        """
        if test is None and data is None:
            raise ValueError("test: give (images, labels) or an idx "
                             "directory as data=")
        _, result = _train.run(
            [self._handle()], net, None, test, progress=progress, data=data,
            epochs=0, batch=batch, micro_batch=micro_batch, lr=None,
            momentum=None, decay=None, stages=stages, platform=platform,
            sync=False, seed=seed, load=load, save=None, train_limit=None,
            test_limit=test_limit)
        acc = result["test_accuracy"]
        return float("nan") if acc is None else acc

    def train_plan(self, net, *, stages=1, platform=None, batch=None,
                   micro_batch=None, sync=False, layers_only=False,
                   fixed_splits=False):
        """The plan train() would follow (ember_train_plan), as text: one
        row per stage with its platform, layers and channels, operations
        per sample, share of the work and expected idle share.

            print(client.train_plan("lenet.cfg", stages=3))
        """
        return _train.plan(
            [self._handle()], net, data=None, epochs=1, batch=batch,
            micro_batch=micro_batch, lr=None, momentum=None, decay=None,
            stages=stages, platform=platform, sync=sync, seed=1, load=None,
            save=None, train_limit=None, test_limit=None,
            layers_only=layers_only, fixed_splits=fixed_splits)

    # -- introspection ---------------------------------------------------

    def _listing(self):
        lst = ctypes.c_void_p()
        check(lib.ember_list_accelerators(self._handle(), ctypes.byref(lst)))
        return lst

    def accelerators(self):
        """What the NAM (or the embedded engine) offers: a list of dicts
        with name, version, platforms (list of platform names), queued and
        origin ("built-in" or a plugin's path). ember.Error(EMBER_ECONNECT)
        in fallback."""
        lst = self._listing()
        try:
            out = []
            for i in range(lib.ember_listing_accelerators(lst)):
                p = lib.ember_listing_accelerator(lst, i)
                if not p:
                    break
                d = _lib.struct_dict(p.contents)
                d["platforms"] = [s.strip() for s in
                                  (d["platforms"] or "").split(",")
                                  if s.strip()]
                out.append(d)
            return out
        finally:
            lib.ember_listing_free(lst)

    def platforms(self):
        """The NAM's platforms (ember_platform_info) as dicts, each with
        "pairs": per-accelerator health dicts (ember_pair_info)."""
        lst = self._listing()
        try:
            out = []
            for i in range(lib.ember_listing_platforms(lst)):
                p = lib.ember_listing_platform(lst, i)
                if not p:
                    break
                pi = p.contents
                d = _lib.struct_dict(pi, skip=("pairs",))
                d["pairs"] = [_lib.struct_dict(pi.pairs[k].contents)
                              for k in range(d["n_pairs"] or 0)]
                out.append(d)
            return out
        finally:
            lib.ember_listing_free(lst)

    def stats(self):
        """This client's counters since connect (ember_client_stats) as a
        dict: tasks_submitted, tasks_completed, tasks_fallback, reconnects,
        bytes_sent, bytes_received, bytes_sent_by_fd, plugins_loaded,
        plugins_refused."""
        s = _lib.EmberClientStats()
        s.size = ctypes.sizeof(s)
        lib.ember_client_get_stats(self._handle(), ctypes.byref(s))
        return _lib.struct_dict(s)
