"""ember.lnl and Client.lnl (ember_lnl): tests/data/plf's reference
log-likelihoods (beagle_double_lnl within 1e-10 relative, as test_lnl.sh
checks `ember lnl`) embedded and through the real ember-nam, site
log-likelihoods, alignments given as dicts and pairs, trees as strings,
and bad input raising ember.Error with the library's message."""

import csv
import os

import numpy as np
import pytest

import ember

from conftest import SOURCE_DIR

DATA = os.path.join(SOURCE_DIR, "tests", "data", "plf")
MODELS = {"GTRG": "GTR{1.2,3.9,0.8,1.1,4.5}+F{0.3,0.2,0.25,0.25}+G4{0.5}",
          "HKYG": "HKY{2.0}+F{0.3,0.2,0.25,0.25}+G4{0.5}"}


def reference_rows():
    """(alignment, tree, model, reference lnl) of both tables."""
    rows = []
    for table, sub in (("reference_lnl.tsv", ""),
                       (os.path.join("protein", "reference_lnl_protein.tsv"),
                        "protein")):
        with open(os.path.join(DATA, table)) as f:
            for r in csv.DictReader(f, delimiter="\t"):
                d = os.path.join(DATA, sub)
                ext = "fasta" if r["dataset"] == "primates" else "phy"
                rows.append((os.path.join(d, "%s.%s" % (r["dataset"], ext)),
                             os.path.join(d, r["dataset"] + ".tree"),
                             MODELS.get(r["model"], r["model"]),
                             float(r["beagle_double_lnl"])))
    assert len(rows) == 15
    return rows


def read_fasta(path):
    seqs, name = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith(">"):
                name = line[1:]
                seqs[name] = ""
            elif line:
                seqs[name] += line
    return seqs


def first_line(path):
    with open(path) as f:
        return f.readline().strip()


def test_reference_embedded(client):
    for aln, tree, model, ref in reference_rows():
        lnl = client.lnl(aln, tree, model)
        assert lnl.dtype == np.float64 and lnl.shape == (1,)
        assert abs(lnl[0] - ref) <= 1e-10 * abs(ref), (aln, model, lnl[0], ref)


def test_reference_through_nam(nam):
    with ember.connect(nam.address, no_fallback=True) as c:
        assert c.connected
        for aln, tree, model, ref in reference_rows():
            lnl, rep = c.lnl(aln, tree, model, report=True)
            assert abs(lnl[0] - ref) <= 1e-10 * abs(ref), (aln, model)
            assert rep["tasks"] == 2 and rep["tasks_cpu"] == 2
            assert rep["trees"] == 1 and rep["trees_failed"] == 0
    # the module-level call on the same NAM, single precision
    aln, tree, model, ref = reference_rows()[0]
    lnl = ember.lnl(aln, tree, model, address=nam.address, precision="single",
                    platform="cpu", threads=2)
    assert abs(lnl[0] - ref) <= 1e-5 * abs(ref)


def test_site_lnl_shape_and_sum(client):
    tree = first_line(os.path.join(DATA, "example.tree"))
    longer = tree.replace("Frog:0.1543000391", "Frog:0.3543000391")
    assert longer != tree
    seen = []
    lnl, site = client.lnl(os.path.join(DATA, "example.phy"),
                           [tree, longer, tree], MODELS["HKYG"],
                           site_lnl=True, progress=lambda d, t:
                           seen.append((d, t)))
    assert lnl.shape == (3,) and site.shape == (3, 1998)
    assert site.dtype == np.float64
    assert abs(lnl[0] - -21901.7163698849) <= 1e-10 * 21901.7163698849
    assert lnl[0] == lnl[2] and lnl[1] != lnl[0]
    np.testing.assert_allclose(site.sum(axis=1), lnl, rtol=1e-9)
    assert seen and seen[-1] == (3, 3)


def test_instances_over_trees(client, nam):
    """Several instances score the trees at once: the same values, in
    order, embedded and through the NAM."""
    tree = first_line(os.path.join(DATA, "example.tree"))
    trees = [tree.replace("Frog:0.1543000391", "Frog:0.%d543000391" % k)
             for k in range(1, 8)]
    aln = os.path.join(DATA, "example.phy")
    one, site_one = client.lnl(aln, trees, MODELS["HKYG"], site_lnl=True)
    with ember.connect(nam.address, no_fallback=True) as c:
        for cl in (client, c):
            lnl, site, rep = cl.lnl(aln, trees, MODELS["HKYG"], instances=3,
                                    site_lnl=True, report=True)
            assert rep["instances"] == 3 and rep["trees"] == 7
            np.testing.assert_array_equal(lnl, one)
            np.testing.assert_array_equal(site, site_one)
    with pytest.raises(ValueError):
        client.lnl(aln, trees, MODELS["HKYG"], instances=0)


def test_alignment_as_dict_and_pairs(client):
    seqs = read_fasta(os.path.join(DATA, "primates.fasta"))
    tree = first_line(os.path.join(DATA, "primates.tree"))
    from_dict = client.lnl(seqs, tree, "JC")
    from_pairs = client.lnl(list(seqs.items()), [tree], "JC")
    from_file = client.lnl(os.path.join(DATA, "primates.fasta"),
                           os.path.join(DATA, "primates.tree"), "JC")
    assert abs(from_dict[0] - -6424.2024471951) <= 1e-10 * 6424.2024471951
    assert from_dict[0] == from_pairs[0] == from_file[0]
    # a tiny one, embedded through the module-level call
    lnl = ember.lnl({"a": "ACGT", "b": "ACGA", "c": "ACCA"},
                    "(a:0.1,b:0.2,c:0.3);", "JC", address="embedded")
    assert lnl.shape == (1,) and lnl[0] < 0


def test_rates_file_is_the_named_model(client):
    aln = os.path.join(DATA, "protein", "stewart.phy")
    tree = os.path.join(DATA, "protein", "stewart.tree")
    named = client.lnl(aln, tree, "LG+G4{0.8}")
    from_file = client.lnl(aln, tree, "+G4{0.8}",
                           rates=os.path.join(DATA, "protein", "lg.dat"))
    assert abs(from_file[0] - named[0]) <= 1e-9 * abs(named[0])


def test_bad_input_raises(client):
    aln = {"a": "ACGT", "b": "ACGA", "c": "ACCA"}
    with pytest.raises(ember.Error) as e:
        client.lnl(aln, ["(a:0.1,b:0.2,c:0.3);", "(a:0.1,b:0.2,Toad:0.3);"],
                   "JC")
    assert e.value.code == ember.EMBER_EPARAM
    assert "newick[1]: taxon 'Toad' is not in the alignment" in str(e.value)
    with pytest.raises(ember.Error) as e:
        client.lnl(aln, "(a:0.1,b,c:0.3);", "JC")
    assert e.value.code == ember.EMBER_EPARAM
    assert "has no branch length" in e.value.detail
    with pytest.raises(ember.Error) as e:
        client.lnl(aln, "(a:0.1,b:0.2,c:0.3);", "GTR{1,2}")
    assert e.value.code == ember.EMBER_EPARAM
    assert "GTR takes 5 rates" in e.value.detail
    with pytest.raises(ember.Error) as e:
        client.lnl({"a": "ACGT", "b": "AC!T", "c": "ACCA"},
                   "(a:0.1,b:0.2,c:0.3);", "JC")
    assert e.value.code == ember.EMBER_EPARAM
    assert "sequences:2: unknown character '!'" in e.value.detail
    with pytest.raises(ember.Error) as e:
        client.lnl(os.path.join(DATA, "missing.phy"), "(a:0.1,b:0.2,c:0.3);",
                   "JC")
    assert e.value.code == ember.EMBER_EIO
    with pytest.raises(ember.Error) as e:
        client.lnl(aln, "(a:0.1,b:0.2,c:0.3);", "JC", max_vectors=1)
    assert "below the minimum" in e.value.detail
    with pytest.raises(ember.Error) as e:
        client.lnl(aln, "(a:0.1,b:0.2,c:0.3);", "JC", platform="fpga-emu")
    assert e.value.code == ember.EMBER_ENOPLATFORM
    with pytest.raises(ValueError):
        client.lnl(aln, "(a:0.1,b:0.2,c:0.3);", "JC", precision="half")
    with pytest.raises(ValueError):
        client.lnl(aln, "(a:0.1,b:0.2,c:0.3);")
    with pytest.raises(TypeError):
        client.lnl(42, "(a:0.1,b:0.2,c:0.3);", "JC")
    with pytest.raises(ember.Error) as e:
        ember.lnl(aln, "(a:0.1,b:0.2,c:0.3);", "JC",
                  address="unix:/nonexistent/nam.sock", platform="fpga-emu")
    assert e.value.code == ember.EMBER_ECONNECT
