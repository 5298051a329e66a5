"""Through the real ember-nam on a unix socket: sw_align, raw tasks, the
listing, stats, and out and state blocks with the test-only tally plugin."""

import os
import struct

import numpy as np
import pytest

import ember

from conftest import decode_sw_result, dna_pairs, seqset


def test_sw_align_over_unix_socket(nam):
    queries, refs = dna_pairs(200)
    with ember.connect("embedded", threads=2) as c:
        want = c.sw_align(queries, refs)
    with ember.connect(nam.address, no_fallback=True,
                       client_name="pytest") as c:
        assert c.connected and c.address == nam.address
        got, rep = c.sw_align(queries, refs, pairs_per_task=50, report=True)
        assert np.array_equal(got, want)
        assert rep["tasks"] == 4 and rep["tasks_cpu"] == 4
        assert rep["tasks_fallback"] == 0
        assert rep["server_ns"] > 0
        st = c.stats()
        assert st["tasks_submitted"] == 4 and st["tasks_fallback"] == 0
        assert st["bytes_sent"] > 0 and st["bytes_received"] > 0
        # blocks this small go inline (cheaper than a memfd each)
        assert st["bytes_sent"] >= sum(map(len, queries + refs))
        assert st["bytes_sent_by_fd"] == 0
        # a reference past the NAM's inline limit (64 KiB) goes as a memfd
        long_ref = "ACGT" * 20000
        hit = c.sw_align([long_ref[1000:1150]], [long_ref])
        assert hit[0]["score"] > 0
        assert c.stats()["bytes_sent_by_fd"] >= len(long_ref)
        accs = c.accelerators()
        assert [a["name"] for a in accs] == ["sw", "plf", "cnn"]
        assert accs[0]["platforms"] == ["cpu"]
        plats = c.platforms()
        assert [p["kind"] for p in plats] == ["cpu"]
        assert plats[0]["workers"] == 2 and plats[0]["completed"] >= 4
        with pytest.raises(ember.Error) as ei:
            c.sw_align(["ACGT"], ["ACXT!"])
        assert ei.value.code == ember.EMBER_EPARAM


def test_sw_align_over_tcp(nam):
    queries, refs = dna_pairs(50)
    with ember.connect("embedded", threads=2) as c:
        want = c.sw_align(queries, refs)
    with ember.connect(nam.tcp_address, no_fallback=True) as c:
        assert c.connected
        assert np.array_equal(c.sw_align(queries, refs), want)
        st = c.stats()
        # over TCP the blocks travel inline in the frames
        assert st["bytes_sent_by_fd"] == 0
        assert st["bytes_sent"] >= sum(map(len, queries + refs))


def test_raw_task_from_nam(nam):
    with ember.connect(nam.address, no_fallback=True) as c:
        q = c.block(seqset([b"ACGTACGTAA"]), cache=True)
        r = c.block(seqset([b"TTACGTACGTTT"]), cache=True)
        with c.run("sw", b"", [q, r], prefer="cpu") as t:
            assert tuple(decode_sw_result(t.output)[0]) == (24, 0, 7, 2, 9)
            info = t.info
            assert info["platform"] == "cpu" and not info["fell_back"]
            assert info["server_ns"] > 0 and info["attempts"] == 1
        with pytest.raises(ember.Error) as ei:
            c.run("sw", b"", [q, r], platform="opencl")
        assert ei.value.code == ember.EMBER_ENOPLATFORM
        assert "cpu" in ei.value.detail


def u64(values):
    return np.asarray(values, dtype="<u8")


def test_out_and_state_blocks(nam_tally):
    with ember.connect(nam_tally.address, no_fallback=True) as c:
        assert any(a["name"] == "tally" and a["origin"] != "built-in"
                   for a in c.accelerators())
        k = struct.pack("<Q", 5)
        inp = c.block(u64([1, 2, 3]))
        # out block: out = 3 * in + k, the result is its sum
        t1 = c.run("tally", k, [inp], n_outputs=1)
        out = t1.outputs[0]
        assert out.kind == "out" and out.size == 24
        assert np.array_equal(np.frombuffer(out.read(), "<u8"), [8, 11, 14])
        assert struct.unpack("<Q", t1.output) == (33,)
        # a later task reads it where it lives
        t2 = c.run("tally", k, [out], n_outputs=1)
        assert np.array_equal(np.frombuffer(t2.outputs[0].read(), "<u8"),
                              [29, 38, 47])
        # state: s = 3 * s + k + sum of inputs, in place
        s = c.block(u64([1, 1, 1]), state=True)
        assert s.kind == "state"
        c.run("tally", k, [inp], states=[s]).free()
        data, ver = s.read(version=True)
        assert ver == 1 and s.version == 1
        assert np.array_equal(np.frombuffer(data, "<u8"), [9, 10, 11])
        assert s.sync() == 1
        c.run("tally", k, [inp], states=[s]).free()
        assert np.array_equal(np.frombuffer(s.read(), "<u8"), [33, 37, 41])
        assert s.version == 2
        assert s.restore() == 1
        data, ver = s.read(version=True)
        assert ver == 1
        assert np.array_equal(np.frombuffer(data, "<u8"), [9, 10, 11])
        with pytest.raises(ember.Error) as ei:
            inp.restore()                 # not a state block
        assert ei.value.code == ember.EMBER_EINVAL


def test_default_address_from_environment(nam, monkeypatch):
    monkeypatch.setenv("EMBER_NAM", nam.address)
    with ember.connect() as c:
        assert c.address == nam.address and c.connected


def test_embedded_plugins(tmp_path):
    plugins = os.environ.get("EMBER_TALLY_PLUGIN_DIR")
    if not plugins:
        pytest.skip("no tally plugin (set EMBER_TALLY_PLUGIN_DIR)")
    missing = str(tmp_path / "none")
    with ember.connect("embedded", plugin_dir=missing, threads=1) as c:
        assert missing in c.connect_warnings    # not an error, but said
    with ember.connect("embedded", plugin_dir=plugins, threads=1) as c:
        assert c.connect_warnings == ""
        assert c.stats()["plugins_loaded"] == 1
        tally = [a for a in c.accelerators() if a["name"] == "tally"]
        assert tally and tally[0]["origin"].endswith("tally.so")
        s = c.block(u64([2, 4]), state=True)
        inp = c.block(u64([1, 1]))
        c.run("tally", struct.pack("<Q", 1), [inp], states=[s]).free()
        assert np.array_equal(np.frombuffer(s.read(), "<u8"), [8, 14])
