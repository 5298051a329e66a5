"""c.sw_align embedded: the library's answers against an independent pure
Python Smith-Waterman, input forms, protein matrices, the report, errors."""

import os

import numpy as np
import pytest

import ember

from conftest import (SW_DATA, dna_pairs, dna_score, matrix_score,
                      read_fasta, read_ncbi_matrix, smith_waterman)


def check_against_reference(res, queries, refs, score, gap_open, gap_extend):
    for i, (q, r) in enumerate(zip(queries, refs)):
        got = res[i]
        want = smith_waterman(q, r, score, gap_open, gap_extend)
        assert (int(got["score"]), int(got["query_end"]),
                int(got["ref_end"])) == want, "pair %d" % i
        if want[0] == 0:
            assert tuple(int(x) for x in got) == (0, -1, -1, -1, -1)
            continue
        qs, qe = int(got["query_start"]), int(got["query_end"])
        rs, re_ = int(got["ref_start"]), int(got["ref_end"])
        assert 0 <= qs <= qe < len(q) and 0 <= rs <= re_ < len(r), got
        # the aligned pieces alone reach the same score
        sub = smith_waterman(q[qs:qe + 1], r[rs:re_ + 1], score, gap_open,
                             gap_extend)
        assert sub[0] == want[0], "pair %d: pieces score %d" % (i, sub[0])


def test_dna_pairs_against_python_reference(client):
    queries, refs = dna_pairs(12)
    res = client.sw_align(queries, refs)
    assert res.dtype == ember.RESULT_DTYPE and res.shape == (12,)
    assert (res["score"] > 0).all()
    check_against_reference(res, queries, refs, dna_score(3, -3), 6, 1)


def test_dna_other_scoring_and_edge_pairs(client):
    queries = ["ACGTACGTAA", "GGGG", "acgtNNacgt", "A", "TTTTTTTTGGGGCCCC"]
    refs = ["TTACGTACGTTT", "CCCC", "ACGTACGT", "A", "TTTTTTTTCCCC"]
    res = client.sw_align(queries, refs, match=2, mismatch=-1, gap_open=3,
                          gap_extend=2)
    enc = [s.encode() for s in queries], [s.encode() for s in refs]
    check_against_reference(res, *enc, dna_score(2, -1), 3, 2)
    assert res["score"][0] == 16 and res["score"][3] == 2
    assert tuple(res[1]) == (0, -1, -1, -1, -1)


def test_input_forms_agree(client):
    queries, refs = dna_pairs(20)
    want = client.sw_align(queries, refs)
    as_str = client.sw_align([q.decode() for q in queries],
                             [r.decode() for r in refs])
    as_np_s = client.sw_align(np.array(queries), np.array(refs))
    as_np_u = client.sw_align(np.array([q.decode() for q in queries]),
                              np.array([r.decode() for r in refs]))
    as_tuple = client.sw_align(tuple(bytearray(q) for q in queries),
                               tuple(memoryview(r) for r in refs))
    for got in (as_str, as_np_s, as_np_u, as_tuple):
        assert np.array_equal(got, want)
    # the task cut does not change answers
    one = client.sw_align(queries, refs, pairs_per_task=1)
    assert np.array_equal(one, want)


def test_report_and_progress(client):
    queries, refs = dna_pairs(40)
    seen = []
    res, rep = client.sw_align(queries, refs, pairs_per_task=8, report=True,
                               progress=lambda d, t: seen.append((d, t)))
    assert len(res) == 40
    assert rep["tasks"] == 5 and rep["tasks_cpu"] == 5
    assert rep["tasks_fallback"] == 0
    assert rep["cells"] == sum(len(q) * len(r) for q, r in zip(queries, refs))
    assert rep["wall_ns"] > 0
    assert seen and seen[-1] == (40, 40)
    assert all(t == 40 for _, t in seen)


def test_progress_exception_is_raised(client):
    queries, refs = dna_pairs(4)

    def boom(done, total):
        raise KeyError("stop")
    with pytest.raises(KeyError):
        client.sw_align(queries, refs, progress=boom)


def test_protein_named_matrix_file_and_reference(client):
    globins = read_fasta(os.path.join(SW_DATA, "emboss_test_globins630.fa"),
                         7)
    queries, refs = globins[:-1], globins[1:]
    named = client.sw_align(queries, refs, protein=True, gap_open=11,
                            gap_extend=1)
    path = os.path.join(SW_DATA, "EBLOSUM62")
    from_file = client.sw_align(queries, refs, protein=True, matrix=path,
                                gap_open=11, gap_extend=1)
    assert np.array_equal(named, from_file)
    assert (named["score"] > 20).all()   # one family: related
    m = read_ncbi_matrix(path)
    check_against_reference(named[:3], queries[:3], refs[:3],
                            matrix_score(m), 11, 1)
    b45 = client.sw_align(queries, refs, protein=True, matrix="BLOSUM45",
                          gap_open=11, gap_extend=1)
    assert not np.array_equal(b45["score"], named["score"])


def test_empty_batch(client):
    res, rep = client.sw_align([], [], report=True)
    assert res.shape == (0,) and res.dtype == ember.RESULT_DTYPE
    assert rep["tasks"] == 0


def test_bad_residue_is_eparam(client):
    with pytest.raises(ember.Error) as ei:
        client.sw_align(["ACGT", "AC1T"], ["ACGT", "ACGT"])
    e = ei.value
    assert e.code == ember.EMBER_EPARAM and e.name == "EMBER_EPARAM"
    assert "unknown residue '1'" in str(e)
    with pytest.raises(ember.Error) as ei:
        client.sw_align(["ACGT", ""], ["ACGT", "ACGT"])
    assert ei.value.code == ember.EMBER_EPARAM
    with pytest.raises(ember.Error) as ei:
        client.sw_align(["MKV"], ["MKV"], protein=True, matrix="NOSUCH")
    assert ei.value.code == ember.EMBER_EPARAM


def test_argument_errors_before_c(client):
    with pytest.raises(ValueError):
        client.sw_align(["ACGT"], ["ACGT", "ACGT"])
    with pytest.raises(TypeError):
        client.sw_align("ACGT", ["ACGT"])
    with pytest.raises(TypeError):
        client.sw_align([1234], ["ACGT"])
    with pytest.raises(TypeError):
        client.sw_align(np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError):
        client.sw_align(["ACGTé"], ["ACGT"])
    with pytest.raises(TypeError):
        client.sw_align(["ACGT"], ["ACGT"], match="3")
    with pytest.raises(TypeError):
        client.sw_align(["ACGT"], ["ACGT"], gap_open=6.5)
    with pytest.raises(ValueError):
        client.sw_align(["ACGT"], ["ACGT"], matrix="BLOSUM62")
    with pytest.raises(ValueError):
        client.sw_align(["ACGT"], ["ACGT"], match=1 << 40)
    with pytest.raises(TypeError):
        client.sw_align(["ACGT"], ["ACGT"], platform=3)
