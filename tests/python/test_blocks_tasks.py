"""Blocks and tasks, embedded: round trips, zero-copy blocks, a raw "sw"
task whose packed Result is decoded here, task info, lifetimes, errors."""

import gc
import threading

import numpy as np
import pytest

import ember

from conftest import decode_sw_result, dna_pairs, seqset

def test_block_round_trips(client):
    raw = bytes(range(256)) * 3
    arr = np.arange(24, dtype=np.float64).reshape(4, 6)
    cases = [
        (raw, raw),
        (bytearray(raw), raw),
        (memoryview(raw)[10:100], raw[10:100]),
        (memoryview(raw)[::3], raw[::3]),          # not contiguous: copied
        (arr, arr.tobytes()),
        (arr.T, np.ascontiguousarray(arr.T).tobytes()),
        (np.arange(5, dtype=np.int32), np.arange(5, dtype=np.int32).tobytes()),
    ]
    for data, want in cases:
        with client.block(data, cache=True) as b:
            assert b.size == len(want)
            assert b.read() == want
            assert b.read(version=True) == (want, 0)
        assert repr(b) == "<ember.Block released>"
        with pytest.raises(ValueError):
            b.read()
        b.release()  # idempotent


def test_alloc_block_zero_copy(client):
    b = client.alloc_block(8 * 100)
    assert not b.sealed
    view = np.frombuffer(b.buffer, dtype=np.uint64)
    view[:] = np.arange(100, dtype=np.uint64) * 7
    mv = b.buffer
    b.seal()
    del view                        # never written after the seal
    with pytest.raises(ValueError):
        mv[0]                       # the memoryview itself is released
    assert b.sealed
    with pytest.raises(ValueError):
        b.buffer
    got = np.frombuffer(b.read(), dtype=np.uint64)
    assert np.array_equal(got, np.arange(100, dtype=np.uint64) * 7)
    b.release()


def test_block_argument_errors(client):
    with pytest.raises(TypeError):
        client.block("text")
    with pytest.raises(TypeError):
        client.block(12)
    with pytest.raises(TypeError):
        client.block(np.array([b"x", None], dtype=object))
    with pytest.raises(TypeError):
        client.alloc_block(1.5)
    with pytest.raises(ValueError):
        client.alloc_block(-1)


def test_raw_sw_task_matches_sw_align(client):
    queries, refs = dna_pairs(10)
    want = client.sw_align(queries, refs)
    qb = client.block(seqset(queries))
    data = seqset(refs)
    rb = client.alloc_block(len(data))
    rb.buffer[:] = data
    rb.seal()
    task = client.submit("sw", b"", [qb, rb], priority=2, platform="cpu")
    assert task.wait(timeout=60)
    assert task.done and task.status == 0 and task.message == ""
    assert task.error is None
    got = decode_sw_result(task.output)
    assert np.array_equal(got, want)
    info = task.info
    assert info["platform_kind"] == "cpu" and info["platform"] == "cpu"
    assert info["fell_back"] is False and info["attempts"] == 1
    assert info["exec_ns"] > 0 and info["round_trip_ns"] >= info["exec_ns"]
    assert set(info) == {"platform", "platform_kind", "fell_back",
                         "queue_ns", "exec_ns", "server_ns", "round_trip_ns",
                         "stage_in_ns", "stage_out_ns", "attempts"}
    assert task.outputs == []
    task.free()
    task.free()
    with pytest.raises(ValueError):
        task.status
    # run(): the same, synchronous
    with client.run("sw", b"", [qb, rb]) as t:
        assert np.array_equal(decode_sw_result(t.output), want)
    st = client.stats()
    assert st["tasks_submitted"] >= 2 + 1  # sw_align's task(s) too
    assert st["tasks_completed"] == st["tasks_submitted"]
    assert st["bytes_sent"] == 0           # embedded
    qb.release()
    rb.release()


def test_task_failures(client):
    qb = client.block(seqset([b"ACGT"]))
    rb = client.block(seqset([b"AC!T"]))
    task = client.submit("sw", b"", [qb, rb])
    task.wait()
    assert task.status == ember.EMBER_EFORMAT
    assert "unknown residue" in task.message
    err = task.error
    assert err.code == ember.EMBER_EFORMAT and err.detail == task.message
    with pytest.raises(ember.Error) as ei:
        task.raise_for_status()
    assert ei.value.code == ember.EMBER_EFORMAT
    with pytest.raises(ember.Error) as ei:
        client.run("sw", b"", [qb])          # one block: malformed input
    assert ei.value.code == ember.EMBER_EFORMAT
    with pytest.raises(ember.Error) as ei:
        client.run("nosuch", b"", [qb, rb])
    assert ei.value.code == ember.EMBER_ENOACCEL
    with pytest.raises(ember.Error) as ei:
        client.run("sw", b"", [qb, qb], platform="fpga-emu")
    assert ei.value.code == ember.EMBER_ENOPLATFORM


def test_submit_argument_errors(client):
    qb = client.block(seqset([b"ACGT"]))
    with pytest.raises(TypeError):
        client.submit(b"sw", b"", [qb, qb])
    with pytest.raises(TypeError):
        client.submit("sw", "params", [qb, qb])
    with pytest.raises(TypeError):
        client.submit("sw", b"", [qb, b"ACGT"])
    with pytest.raises(TypeError):
        client.submit("sw", b"", qb)
    with pytest.raises(TypeError):
        client.submit("sw", b"", [qb, qb], priority="high")
    with ember.connect("embedded", threads=1) as other:
        ob = other.block(b"x")
        with pytest.raises(ValueError):
            client.submit("sw", b"", [qb, ob])
    with pytest.raises(ValueError):
        client.submit("sw", b"", [qb, ob])   # its client is closed


def test_wait_timeout_and_cancel(client):
    queries, refs = dna_pairs(2000)
    qb = client.block(seqset(queries * 4))
    rb = client.block(seqset(refs * 4))
    task = client.submit("sw", b"", [qb, rb])
    task.cancel()
    assert task.wait(timeout=60)
    assert task.status in (0, ember.EMBER_ECANCELED)
    t2 = client.submit("sw", b"", [qb, rb])
    assert t2.wait(timeout=0) in (False, True)
    with pytest.raises(ValueError):
        t2.wait(timeout=-1)
    with pytest.raises(TypeError):
        t2.wait(timeout="1")
    assert t2.wait(timeout=1e12)    # past what a C int of ms holds
    del t2                  # freed (canceled) by garbage collection
    gc.collect()


def test_close_releases_everything():
    c = ember.connect("embedded", threads=1, client_name="pytest")
    assert c.address == "embedded" and not c.connected
    b = c.block(b"abc")
    t = c.submit("sw", b"", [b, b])
    c.close()
    c.close()               # idempotent
    assert c.closed and repr(c) == "<ember.Client closed>"
    with pytest.raises(ValueError):
        b.size
    with pytest.raises(ValueError):
        t.done
    with pytest.raises(ValueError):
        c.block(b"x")
    b.release()
    t.free()


def test_connect_errors(tmp_path):
    with pytest.raises(ember.Error) as ei:
        ember.connect("unix:%s/none.sock" % tmp_path, no_fallback=True,
                      connect_timeout_ms=200)
    assert ei.value.code == ember.EMBER_ECONNECT
    with pytest.raises(TypeError):
        ember.connect(5)
    with pytest.raises(TypeError):
        ember.connect("embedded", threads="2")
    with pytest.raises(ValueError):
        ember.connect("embedded", threads=-1)
    # unreachable without no_fallback: a client in fallback
    with ember.connect("unix:%s/none.sock" % tmp_path,
                       connect_timeout_ms=200) as c:
        assert not c.connected
        res = c.sw_align(["ACGTACGT"], ["TTACGTACGTTT"])
        assert res["score"][0] == 24
        with pytest.raises(ember.Error) as ei:
            c.accelerators()
        assert ei.value.code == ember.EMBER_ECONNECT
        assert c.stats()["tasks_fallback"] >= 1


def test_listing(client):
    accs = client.accelerators()
    sw = [a for a in accs if a["name"] == "sw"]
    assert sw and sw[0]["origin"] == "built-in" and "cpu" in sw[0]["platforms"]
    plats = client.platforms()
    cpu = [p for p in plats if p["kind"] == "cpu"]
    assert cpu and cpu[0]["workers"] == 2
    assert any(pr["accelerator"] == "sw" for pr in cpu[0]["pairs"])


def test_threads_share_a_client(client):
    queries, refs = dna_pairs(100)
    want = client.sw_align(queries, refs)
    got = [None] * 4

    def work(i):
        got[i] = client.sw_align(queries, refs, pairs_per_task=10)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g in got:
        assert np.array_equal(g, want)
