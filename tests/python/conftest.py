"""Fixtures of the Python binding's tests: the library under test comes
from $EMBER_LIBRARY (ctest points it at the build tree's libember.so.0), the
package from $PYTHONPATH; helpers: FASTA pairs of tests/data/sw, a pure
Python Smith-Waterman, the real ember-nam started on a private socket."""

import os
import signal
import socket
import struct
import subprocess
import tempfile
import time

import numpy as np
import pytest

SOURCE_DIR = os.environ.get(
    "EMBER_SOURCE_DIR",
    os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
SW_DATA = os.path.join(SOURCE_DIR, "tests", "data", "sw")


def read_fasta(path, limit=None):
    """The sequences of a FASTA file, as bytes, in order."""
    seqs, cur = [], None
    with open(path, "rb") as f:
        for line in f:
            line = line.strip()
            if line.startswith(b">"):
                if cur is not None:
                    seqs.append(b"".join(cur))
                    if limit and len(seqs) == limit:
                        return seqs
                cur = []
            elif cur is not None:
                cur.append(line)
    if cur is not None:
        seqs.append(b"".join(cur))
    return seqs[:limit] if limit else seqs


def dna_pairs(limit=None):
    return (read_fasta(os.path.join(SW_DATA, "dna_queries.fa"), limit),
            read_fasta(os.path.join(SW_DATA, "dna_refs.fa"), limit))


def read_ncbi_matrix(path):
    """An NCBI-format substitution matrix as {(a, b): score}, upper case."""
    cols, m = None, {}
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split()
            if cols is None:
                cols = parts
                continue
            for c, v in zip(cols, parts[1:]):
                m[(parts[0], c)] = int(v)
    return m


def dna_score(match, mismatch):
    """accelerators/sw/sw.proto: A/C/G/T in any case score match or
    mismatch, other IUPAC letters 0."""
    def score(a, b):
        a, b = chr(a).upper(), chr(b).upper()
        if a in "ACGT" and b in "ACGT":
            return match if a == b else mismatch
        return 0
    return score


def matrix_score(m):
    def score(a, b):
        return m[(chr(a).upper(), chr(b).upper())]
    return score


def smith_waterman(q, r, score, gap_open, gap_extend):
    """Independent reference: Gotoh's affine Smith-Waterman (a gap of k
    costs gap_open + (k-1) * gap_extend). Returns (score, query_end,
    ref_end), the end being the smallest ref end, then the smallest query
    end, among the best-scoring cells (parasail's rule, sw.proto); ends
    are -1 when the score is 0."""
    n = len(r)
    neg = -(1 << 30)
    h_prev = [0] * (n + 1)
    f = [neg] * (n + 1)
    best = (0, -1, -1)  # score, ref end, query end
    for i in range(1, len(q) + 1):
        qi = q[i - 1]
        h = [0] * (n + 1)
        e = neg
        for j in range(1, n + 1):
            e = max(h[j - 1] - gap_open, e - gap_extend)
            f[j] = max(h_prev[j] - gap_open, f[j] - gap_extend)
            v = max(0, h_prev[j - 1] + score(qi, r[j - 1]), e, f[j])
            h[j] = v
            if v > best[0] or (v == best[0] and v > 0 and
                               (j - 1, i - 1) < (best[1], best[2])):
                best = (v, j - 1, i - 1)
        h_prev = h
    return best[0], best[2], best[1]


SEQSET_MAGIC = 0x31515345


def seqset(seqs):
    """accelerators/sw/seqset.h: magic, count, count+1 offsets, residues."""
    offs = [0]
    for s in seqs:
        offs.append(offs[-1] + len(s))
    return struct.pack("<%dI" % (2 + len(offs)), SEQSET_MAGIC, len(seqs),
                       *offs) + b"".join(seqs)


def varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def decode_sw_result(buf):
    """ember.sw.Result (sw.proto): five packed sint32 fields."""
    fields = {n: [] for n in range(1, 6)}
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        assert key & 7 == 2, "packed fields only"
        n, i = varint(buf, i)
        end = i + n
        while i < end:
            z, i = varint(buf, i)
            fields[key >> 3].append((z >> 1) ^ -(z & 1))
    import ember
    rows = list(zip(*(fields[n] for n in range(1, 6))))
    return np.array(rows, dtype=ember.RESULT_DTYPE)


@pytest.fixture
def client():
    import ember
    with ember.connect("embedded", threads=2) as c:
        yield c


class Nam:
    """The real ember-nam with a generated config on a private unix socket;
    ready when it sends READY=1 to NOTIFY_SOCKET (never a sleep)."""

    def __init__(self, extra=""):
        self.bin = os.environ.get("EMBER_NAM_BIN") or os.path.join(
            SOURCE_DIR, "build", "nam", "ember-nam")
        if not os.access(self.bin, os.X_OK):
            pytest.skip("no ember-nam at %s (set EMBER_NAM_BIN)" % self.bin)
        self.dir = tempfile.mkdtemp(prefix="ember-py.", dir="/tmp")
        self.sock = os.path.join(self.dir, "nam.sock")
        self.address = "unix:" + self.sock
        with socket.socket() as s:   # a port free now: the kernel's pick
            s.bind(("127.0.0.1", 0))
            self.tcp_address = "tcp:127.0.0.1:%d" % s.getsockname()[1]
        self.config = os.path.join(self.dir, "nam.conf")
        self.log = os.path.join(self.dir, "nam.log")
        with open(self.config, "w") as f:
            f.write("listen = %s, %s\nlog_level = debug\nmetrics_listen =\n"
                    "cpu_workers = 2\n%s\n[opencl]\nenabled = false\n"
                    "[fpga-emu]\nboards = 0\n"
                    % (self.address, self.tcp_address, extra))
        notify_path = os.path.join(self.dir, "notify")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(notify_path)
        env = dict(os.environ, NOTIFY_SOCKET=notify_path)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([self.bin, "--config", self.config],
                                         stdout=log, stderr=log, env=env)
        self._wait_ready()

    def _wait_ready(self):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("ember-nam exited (%s) before READY:\n%s"
                                   % (self.proc.returncode, self.log_text()))
            self.notify.settimeout(0.1)
            try:
                msg = self.notify.recv(4096)
            except socket.timeout:
                continue
            if b"READY=1" in msg.split(b"\n"):
                return
        self.stop()
        raise RuntimeError("no READY=1 from ember-nam within 10 s:\n"
                           + self.log_text())

    def log_text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.notify.close()
        for name in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, name))
        os.rmdir(self.dir)
        return self.proc.returncode


@pytest.fixture
def nam():
    n = Nam()
    yield n
    assert n.stop() == 0, n.log_text()


@pytest.fixture
def nam_tally():
    """ember-nam with the test-only tally plugin (out and state blocks)."""
    plugins = os.environ.get("EMBER_TALLY_PLUGIN_DIR")
    if not plugins or not os.path.exists(os.path.join(plugins, "tally.so")):
        pytest.skip("no tally plugin (set EMBER_TALLY_PLUGIN_DIR)")
    n = Nam("plugin_dir = %s" % plugins)
    yield n
    assert n.stop() == 0, n.log_text()
