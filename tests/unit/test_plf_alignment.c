/* test_plf_alignment.c - the plf alignment readers (PHYLIP, FASTA, NEXUS)
 * on tiny inline files and on the real data in tests/data/plf: layouts,
 * names, ambiguity codes, data types, pattern compression, tip encodings,
 * empirical frequencies, every error with its file:line, and allocation
 * failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <htslib/bgzf.h>
#include <math.h>

#include "alloc_fail.h"
#include "plf_alignment.h"

#define DATA EMBER_SOURCE_DIR "/tests/data/plf/"

#define assert_contains(text, needle)                                        \
  do {                                                                       \
    if (!strstr((text), (needle)))                                           \
      fail_msg("\"%s\" does not contain \"%s\"", (text), (needle));          \
  } while (0)

#define assert_near(a, b, tol)                                               \
  do {                                                                       \
    double a_ = (a), b_ = (b);                                               \
    if (!(fabs(a_ - b_) <= (tol)))                                           \
      fail_msg("%s = %.17g, expected %.17g (tolerance %g)", #a, a_, b_,     \
               (double)(tol));                                               \
  } while (0)

static plf_alignment *parse_ok(const char *text, const char *source,
                               plf_format format, plf_datatype type) {
  plf_alignment *a = NULL;
  char err[512];
  int rc = plf_alignment_parse(text, strlen(text), source, format, type, &a,
                               err, sizeof err);
  if (rc) fail_msg("parse failed: %d %s", rc, err);
  assert_non_null(a);
  return a;
}

/* Parse text that must fail with rc and a message containing want. */
static void parse_fails(const char *text, const char *source,
                        plf_format format, plf_datatype type, int rc,
                        const char *want) {
  plf_alignment *a = (plf_alignment *)1;
  char err[512];
  int got = plf_alignment_parse(text, strlen(text), source, format, type, &a,
                                err, sizeof err);
  if (got != rc)
    fail_msg("rc %d (%s), expected %d, for:\n%s", got, err, rc, text);
  assert_null(a);
  assert_contains(err, want);
}

/* The alignment's characters back, as masks, one string per taxon. */
static uint32_t mask_at(const plf_alignment *a, size_t taxon, size_t site) {
  return plf_alignment_mask(a, taxon,
                            plf_alignment_site_patterns(a)[site]);
}

enum { A = 1, C = 2, G = 4, T = 8, ANY4 = 15 };

/* ---- PHYLIP -------------------------------------------------------------- */
static void test_phylip_sequential(void **state) {
  (void)state;
  plf_alignment *a = parse_ok("3 8\n"
                              "alpha ACGT\n"
                              "ACGT\n"
                              "beta  ACGTACGA\n"
                              "gamma ACG\n"
                              "TA CGC\n",
                              "t.phy", PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  assert_int_equal(plf_alignment_format(a), PLF_FORMAT_PHYLIP);
  assert_int_equal(plf_alignment_datatype(a), PLF_DATA_DNA);
  assert_int_equal(plf_alignment_states(a), 4);
  assert_int_equal(plf_alignment_taxa(a), 3);
  assert_int_equal(plf_alignment_sites(a), 8);
  assert_string_equal(plf_alignment_name(a, 0), "alpha");
  assert_string_equal(plf_alignment_name(a, 1), "beta");
  assert_string_equal(plf_alignment_name(a, 2), "gamma");
  assert_null(plf_alignment_name(a, 3));
  assert_int_equal(mask_at(a, 1, 7), A);
  assert_int_equal(mask_at(a, 2, 7), C);
  assert_int_equal(mask_at(a, 0, 7), T);
  plf_alignment_destroy(a);
}

static void test_phylip_interleaved(void **state) {
  (void)state;
  plf_alignment *a = parse_ok("3 10\n"
                              "alpha ACGTA\n"
                              "beta  ACGTC\n"
                              "gamma ACGTG\n"
                              "\n"
                              "  CCCCC\n"
                              "  GGGGG\n"
                              "  TTTT T\n",
                              "t.phy", PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  assert_int_equal(plf_alignment_taxa(a), 3);
  assert_int_equal(plf_alignment_sites(a), 10);
  assert_int_equal(mask_at(a, 0, 4), A);
  assert_int_equal(mask_at(a, 1, 4), C);
  assert_int_equal(mask_at(a, 0, 9), C);
  assert_int_equal(mask_at(a, 1, 9), G);
  assert_int_equal(mask_at(a, 2, 9), T);
  plf_alignment_destroy(a);
}

static void test_phylip_names(void **state) {
  (void)state;
  /* relaxed: long names, tabs, CRLF, a UTF-8 BOM */
  plf_alignment *a = parse_ok("\xEF\xBB\xBF 2 4 \r\n"
                              "Homo_sapiens_mitochondrion\tACGT\r\n"
                              "Pan_troglodytes ACGA\r\n",
                              "t.phy", PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  assert_string_equal(plf_alignment_name(a, 0),
                      "Homo_sapiens_mitochondrion");
  assert_string_equal(plf_alignment_name(a, 1), "Pan_troglodytes");
  size_t t = 99;
  assert_int_equal(plf_alignment_find(a, "Pan_troglodytes", &t), 0);
  assert_int_equal(t, 1);
  assert_int_equal(plf_alignment_find(a, "Pan", &t), EMBER_ENOTFOUND);
  plf_alignment_destroy(a);
  /* strict: 10 characters, blanks inside, sequence right after */
  a = parse_ok("2 6\n"
               "Homo sapieACGTAC\n"
               "Pan       ACGTAA\n",
               "t.phy", PLF_FORMAT_PHYLIP_STRICT, PLF_DATA_AUTO);
  assert_string_equal(plf_alignment_name(a, 0), "Homo sapie");
  assert_string_equal(plf_alignment_name(a, 1), "Pan");
  assert_int_equal(mask_at(a, 0, 0), A);
  assert_int_equal(plf_alignment_format(a), PLF_FORMAT_PHYLIP_STRICT);
  plf_alignment_destroy(a);
}

static void test_phylip_errors(void **state) {
  (void)state;
  parse_fails("x y\n", "t.phy", PLF_FORMAT_PHYLIP, PLF_DATA_AUTO,
              EMBER_EFORMAT, "t.phy:1: expected a PHYLIP header 'ntaxa nsites'");
  parse_fails("\n\n3\n", "t.phy", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_EFORMAT, "t.phy:3: expected a PHYLIP header");
  parse_fails("2 4 x\n", "t.phy", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_EFORMAT, "t.phy:1: expected a PHYLIP header");
  parse_fails("0 4\n", "t.phy", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_EFORMAT, "t.phy:1: the header declares 0 taxa and 4 sites");
  parse_fails("100001 4\n", "t.phy", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_ETOOBIG,
              "t.phy:1: the header declares 100001 taxa (the limit is 100000)");
  parse_fails("2 16777217\n", "t.phy", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_ETOOBIG, "t.phy:1: the header declares 16777217 sites");
  parse_fails("99999999999999999999999 1\n", "t.phy", PLF_FORMAT_AUTO,
              PLF_DATA_AUTO, EMBER_ETOOBIG, "t.phy:1: the header declares");
  parse_fails("100000 16777216\n", "t.phy", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_ETOOBIG, "t.phy:1: the header declares 100000 x 16777216");
  parse_fails("2 4\na ACGT\nb ACG\n", "t.phy", PLF_FORMAT_AUTO,
              PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.phy:3: the file ends inside taxon 'b' (3 of 4 sites)");
  parse_fails("2 4\na ACGTA\nb ACGT\n", "t.phy", PLF_FORMAT_AUTO,
              PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.phy:2: taxon 'a' has more than the 4 sites declared");
  parse_fails("3 4\na ACGT\nb ACGT\n", "t.phy", PLF_FORMAT_AUTO,
              PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.phy:3: the file ends after 2 of the 3 taxa declared");
  parse_fails("1 4\na ACGT\nextra\n", "t.phy", PLF_FORMAT_AUTO,
              PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.phy:3: text after the last of the 1 taxa declared");
  parse_fails("2 4\na AC1T\nb ACGT\n", "t.phy", PLF_FORMAT_AUTO,
              PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.phy:2: unknown character '1' in taxon 'a' (site 3)");
  parse_fails("2 4\na ACGT\na ACGA\n", "t.phy", PLF_FORMAT_AUTO,
              PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.phy:3: duplicate taxon name 'a' (also at line 2)");
  /* interleaved: a block that leaves the taxa uneven */
  parse_fails("2 8\na ACGT\nb ACGT\nACGT\nACG\n", "t.phy", PLF_FORMAT_AUTO,
              PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.phy:5: interleaved block ending here: taxon 'b' has 7 "
              "sites so far, 'a' has 8");
  parse_fails("2 12\na ACGT\nb ACGT\nACGT\nACGT\nACGT\n", "t.phy",
              PLF_FORMAT_AUTO, PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.phy:6: the file ends inside an interleaved block (1 of its 2 "
              "lines)");
  /* a name over the limit */
  char big[600];
  snprintf(big, sizeof big, "1 2\n%0300d AC\n", 0);
  parse_fails(big, "t.phy", PLF_FORMAT_AUTO, PLF_DATA_AUTO, EMBER_ETOOBIG,
              "t.phy:2: a taxon name of 300 bytes (the limit is 256)");
  parse_fails("2 2\na \x01" "C\nb AC\n", "t.phy", PLF_FORMAT_AUTO,
              PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.phy:2: unknown character byte 0x01 in taxon 'a' (site 1)");
}

/* ---- FASTA --------------------------------------------------------------- */
static void test_fasta(void **state) {
  (void)state;
  plf_alignment *a = parse_ok("; a comment\n"
                              ">one first sequence\n"
                              "acgt\n"
                              "\n"
                              "AC GT\n"
                              ">two\tdescription\r\n"
                              "ACGTACGA\r\n"
                              ";another\n",
                              "t.fa", PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  assert_int_equal(plf_alignment_format(a), PLF_FORMAT_FASTA);
  assert_int_equal(plf_alignment_taxa(a), 2);
  assert_int_equal(plf_alignment_sites(a), 8);
  assert_string_equal(plf_alignment_name(a, 0), "one");
  assert_string_equal(plf_alignment_name(a, 1), "two");
  assert_int_equal(mask_at(a, 0, 0), A);
  assert_int_equal(mask_at(a, 0, 7), T);
  assert_int_equal(mask_at(a, 1, 7), A);
  plf_alignment_destroy(a);
}

static void test_fasta_errors(void **state) {
  (void)state;
  parse_fails(">a\nACGT\n>b\nACG\n", "t.fa", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_EFORMAT,
              "t.fa:3: unequal lengths: sequence 'b' has 3 sites, the first "
              "one ('a', line 1) has 4");
  parse_fails(">a\nAC1T\n", "t.fa", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_EFORMAT, "t.fa:2: unknown character '1' in taxon 'a' (site 3)");
  parse_fails(">a\nACGT\n>b\nAC*T\n", "t.fa", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_EFORMAT, "t.fa:4: unknown character '*' in taxon 'b' (site 3)");
  parse_fails(">a\nAC\n>b\nAC\n>a\nAG\n", "t.fa", PLF_FORMAT_AUTO,
              PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.fa:5: duplicate taxon name 'a' (also at line 1)");
  parse_fails(">a\n>b\n", "t.fa", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_EFORMAT, "t.fa:1: the sequences have no sites");
  parse_fails("> \nAC\n", "t.fa", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_EFORMAT, "t.fa:1: a '>' line without a name");
  parse_fails("ACGT\n", "t.fa", PLF_FORMAT_FASTA, PLF_DATA_AUTO,
              EMBER_EFORMAT, "t.fa:1: expected a '>' line, found 'A'");
  /* the data type decides which letters are codes */
  parse_fails(">a\nACGTACGTACGTACGTACGTE\n>b\nACGTACGTACGTACGTACGTA\n", "t.fa",
              PLF_FORMAT_AUTO, PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.fa:2: unknown character 'E' in taxon 'a' (site 21): not a "
              "DNA code");
  parse_fails(">a\nACGTACGT\n>b\n\nACGT\nACGU\n", "t.fa", PLF_FORMAT_AUTO,
              PLF_DATA_PROTEIN, EMBER_EFORMAT,
              "t.fa:6: unknown character 'U' in taxon 'b' (site 8): not a "
              "protein code");
  parse_fails(">a\nMKVO\n", "t.fa", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_EFORMAT, "t.fa:2: unknown character 'O' in taxon 'a' (site 4)");
}

/* ---- NEXUS --------------------------------------------------------------- */
static void test_nexus(void **state) {
  (void)state;
  plf_alignment *a = parse_ok(
      "#NEXUS\n"
      "[ a comment [nested] ]\n"
      "begin taxa; dimensions ntax=2; taxlabels 'Homo sapiens' Pan; end;\n"
      "BEGIN CHARACTERS;\n"
      "  DIMENSIONS NCHAR=6;\n"
      "  FORMAT DATATYPE=DNA MISSING=N GAP=~ MATCHCHAR=.;\n"
      "  CHARSTATELABELS 1 one, 2 two;\n"
      "  MATRIX\n"
      "    'Homo sapiens' ACG[comment]T~N\n"
      "    Pan            .T..A?\n"
      "  ;\n"
      "END;\n"
      "begin trees; tree t = [&U] ('Homo sapiens':1,Pan:2); end;\n",
      "t.nex", PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  assert_int_equal(plf_alignment_format(a), PLF_FORMAT_NEXUS);
  assert_int_equal(plf_alignment_taxa(a), 2);
  assert_int_equal(plf_alignment_sites(a), 6);
  assert_string_equal(plf_alignment_name(a, 0), "Homo sapiens");
  assert_int_equal(mask_at(a, 0, 4), ANY4); /* GAP=~ */
  assert_int_equal(mask_at(a, 0, 5), ANY4); /* MISSING=N */
  assert_int_equal(mask_at(a, 1, 0), A);    /* . = first taxon */
  assert_int_equal(mask_at(a, 1, 1), T);
  assert_int_equal(mask_at(a, 1, 3), T);
  assert_int_equal(mask_at(a, 1, 4), A);
  plf_alignment_destroy(a);

  /* DATA, interleaved, protein declared although the letters look like
   * DNA, quoted name with a quote */
  a = parse_ok("#nexus\n"
               "begin data;\n"
               " dimensions ntax=2 nchar=8;\n"
               " format datatype=protein interleave;\n"
               " matrix\n"
               " 'it''s' ACGT\n"
               " b       ACGA\n"
               "\n"
               " 'it''s' BZJX\n"
               " b       -?AC\n"
               " ;\n"
               "end;\n",
               "t.nex", PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  assert_int_equal(plf_alignment_datatype(a), PLF_DATA_PROTEIN);
  assert_string_equal(plf_alignment_name(a, 0), "it's");
  assert_int_equal(plf_alignment_sites(a), 8);
  assert_int_equal(mask_at(a, 0, 4), (1u << 2) | (1u << 3)); /* B: N|D */
  plf_alignment_destroy(a);

  /* INTERLEAVE=NO, a row running over lines */
  a = parse_ok("#NEXUS\nBEGIN DATA; DIMENSIONS NTAX=2 NCHAR=8;\n"
               "FORMAT INTERLEAVE=NO;\nMATRIX\n"
               "a ACGT\nACGT\nb ACGTACGA;\nEND;\n",
               "t.nex", PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  assert_int_equal(mask_at(a, 1, 7), A);
  plf_alignment_destroy(a);
}

static void test_nexus_errors(void **state) {
  (void)state;
  const char *head = "#NEXUS\nbegin data;\ndimensions ntax=2 nchar=4;\n";
  char buf[1024];
#define NX(tail, rc, want)                                                   \
  do {                                                                       \
    snprintf(buf, sizeof buf, "%s%s", head, tail);                           \
    parse_fails(buf, "t.nex", PLF_FORMAT_AUTO, PLF_DATA_AUTO, rc, want);     \
  } while (0)
  NX("matrix\na ACGT\nb ACG\n;\nend;\n", EMBER_EFORMAT,
     "t.nex:6: taxon 'b' has 3 sites, 4 were declared");
  NX("matrix\na ACGT\nb ACGT\n", EMBER_EFORMAT,
     "t.nex:4: MATRIX never ends (no ';')");
  NX("matrix\na ACGT\nb ACGT;\n", EMBER_EFORMAT,
     "t.nex:2: block data never ends (no END;)");
  NX("matrix\na ACGT\nb ACGT\nc ACGT;\nend;", EMBER_EFORMAT,
     "t.nex:7: taxon 'c' is one more than NTAX=2");
  NX("matrix\na ACGT;\nend;", EMBER_EFORMAT,
     "t.nex:4: the MATRIX has 1 taxa, NTAX=2");
  NX("matrix\na ACGT\na ACGT;\nend;", EMBER_EFORMAT,
     "t.nex:6: taxon 'a' appears twice in the MATRIX (also at line 5)");
  NX("matrix\na AC{GT}T\nb ACGT;\nend;", EMBER_EFORMAT,
     "t.nex:5: taxon 'a' (site 3): polymorphic or uncertain states {...} "
     "are not supported");
  NX("matrix\na AC#T\nb ACGT;\nend;", EMBER_EFORMAT,
     "t.nex:5: unknown character '#' in taxon 'a' (site 3)");
  NX("format datatype=standard;\n", EMBER_EFORMAT,
     "t.nex:4: DATATYPE=standard is not supported");
  NX("format transpose;\n", EMBER_EFORMAT,
     "t.nex:4: FORMAT transpose is not supported");
  NX("format gap=--;\n", EMBER_EFORMAT,
     "t.nex:4: GAP=--: expected one character");
  NX("[ never closed\nmatrix a ACGT b ACGT; end;", EMBER_EFORMAT,
     "t.nex:4: a comment '[' that is never closed");
  NX("format matchchar=.;\nmatrix\na .CGT\nb ACGT;\nend;", EMBER_EFORMAT,
     "t.nex:6: match character '.' in taxon 'a' (site 1) has no first-taxon "
     "character to copy");
  NX("dimensions ntax=x;\n", EMBER_EFORMAT, "t.nex:4: NTAX=x is not a count");
  NX("dimensions nchar=16777217;\n", EMBER_ETOOBIG,
     "t.nex:4: NCHAR=16777217 (the limit is 16777216)");
  parse_fails("#NEXUS\nbegin characters; dimensions nchar=2;\nmatrix a AC;\n"
              "end;\n", "t.nex", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_EFORMAT,
              "t.nex:3: MATRIX before NTAX= (in DIMENSIONS or a TAXA block)");
  parse_fails("#NEXUS\nbegin taxa; dimensions ntax=1; taxlabels a; end;\n"
              "begin characters; dimensions nchar=2; matrix b AC; end;\n",
              "t.nex", PLF_FORMAT_AUTO, PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.nex:3: taxon 'b' is not in the TAXA block");
  parse_fails("#NEXUS\nbegin taxa; dimensions ntax=2; taxlabels a\na; end;\n"
              "begin characters; dimensions nchar=2; matrix a AC; end;\n",
              "t.nex", PLF_FORMAT_AUTO, PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.nex:3: duplicate taxon name 'a' (also at line 2)");
  parse_fails("#NEXUS\nbegin trees; end;\n", "t.nex", PLF_FORMAT_AUTO,
              PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.nex: no DATA or CHARACTERS block with a MATRIX");
  parse_fails("#NEXUS\nhello;\n", "t.nex", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_EFORMAT, "t.nex:2: expected BEGIN, found 'hello'");
  parse_fails("#NEXUS\nbegin data; format datatype=protein; end;\n", "t.nex",
              PLF_FORMAT_AUTO, PLF_DATA_DNA, EMBER_EFORMAT,
              "t.nex:2: DATATYPE=protein, but DNA data was asked for");
#undef NX
}

/* MrBayes's primates.nex and the FASTA copy of the same alignment */
static void test_nexus_primates(void **state) {
  (void)state;
  char err[512];
  plf_alignment *nex, *fa;
  int rc = plf_alignment_read(DATA "primates.nex", PLF_FORMAT_AUTO,
                              PLF_DATA_AUTO, &nex, err, sizeof err);
  if (rc) fail_msg("%s", err);
  rc = plf_alignment_read(DATA "primates.fasta", PLF_FORMAT_AUTO,
                          PLF_DATA_AUTO, &fa, err, sizeof err);
  if (rc) fail_msg("%s", err);
  assert_int_equal(plf_alignment_taxa(nex), 12);
  assert_int_equal(plf_alignment_sites(nex), 898);
  assert_int_equal(plf_alignment_patterns(nex), plf_alignment_patterns(fa));
  for (size_t t = 0; t < 12; t++) {
    assert_string_equal(plf_alignment_name(nex, t), plf_alignment_name(fa, t));
    for (size_t p = 0; p < plf_alignment_patterns(fa); p++)
      assert_int_equal(plf_alignment_mask(nex, t, p),
                       plf_alignment_mask(fa, t, p));
  }
  plf_alignment_destroy(nex);
  plf_alignment_destroy(fa);
}

/* ---- detection, ambiguity ------------------------------------------------ */
static void test_detect(void **state) {
  (void)state;
  parse_fails("", "t.x", PLF_FORMAT_AUTO, PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.x: empty input: no sequences");
  parse_fails(" \n\t\n", "t.x", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_EFORMAT, "t.x: empty input: no sequences");
  parse_fails("\n\nhello\n", "t.x", PLF_FORMAT_AUTO, PLF_DATA_AUTO,
              EMBER_EFORMAT,
              "t.x:3: cannot tell the format: the text starts with 'h'");
  parse_fails("", "t.fa", PLF_FORMAT_FASTA, PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.fa: empty input: no sequences");
  parse_fails("", "t.phy", PLF_FORMAT_PHYLIP, PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.phy: empty input: no sequences");
  parse_fails("", "t.nex", PLF_FORMAT_NEXUS, PLF_DATA_AUTO, EMBER_EFORMAT,
              "t.nex: empty input");
  /* 90% A C G T U N among the letters: DNA; less: protein */
  plf_alignment *a = parse_ok(">a\nACGTACGTAR\n>b\nACGTACGTAN\n", "t.fa",
                              PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  assert_int_equal(plf_alignment_datatype(a), PLF_DATA_DNA);
  plf_alignment_destroy(a);
  a = parse_ok(">a\nACGTACGRRR\n>b\nACGTACGTAN\n", "t.fa", PLF_FORMAT_AUTO,
               PLF_DATA_AUTO);
  assert_int_equal(plf_alignment_datatype(a), PLF_DATA_PROTEIN);
  assert_int_equal(plf_alignment_states(a), 20);
  plf_alignment_destroy(a);
  a = parse_ok(">a\n----\n", "t.fa", PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  assert_int_equal(plf_alignment_datatype(a), PLF_DATA_DNA);
  plf_alignment_destroy(a);
  a = parse_ok(">a\nACGT\n", "t.fa", PLF_FORMAT_AUTO, PLF_DATA_PROTEIN);
  assert_int_equal(plf_alignment_datatype(a), PLF_DATA_PROTEIN);
  plf_alignment_destroy(a);
  char err[64];
  plf_alignment *none = NULL;
  assert_int_equal(plf_alignment_parse("x", 1, NULL, 9, 0, &none, err,
                                       sizeof err),
                   EMBER_EINVAL);
  assert_int_equal(plf_alignment_parse(NULL, 1, NULL, 0, 0, &none, err,
                                       sizeof err),
                   EMBER_EINVAL);
}

static void test_dna_codes(void **state) {
  (void)state;
  const char *codes = "ACGTURYMKSWHBVDN-?";
  const uint32_t want[] = {A,         C,         G,         T,
                           T,         A | G,     C | T,     A | C,
                           G | T,     C | G,     A | T,     A | C | T,
                           C | G | T, A | C | G, A | G | T, ANY4,
                           ANY4,      ANY4};
  char text[128];
  snprintf(text, sizeof text, ">x\n%s\n>y\n%s\n", codes, "acgturymkswhbvdn-?");
  plf_alignment *a = parse_ok(text, "t.fa", PLF_FORMAT_AUTO, PLF_DATA_DNA);
  for (size_t s = 0; s < strlen(codes); s++) {
    if (mask_at(a, 0, s) != want[s] || mask_at(a, 1, s) != want[s])
      fail_msg("'%c': mask %u/%u, expected %u", codes[s], mask_at(a, 0, s),
               mask_at(a, 1, s), want[s]);
  }
  /* one pattern per distinct set: U = T, N = - = ? */
  assert_int_equal(plf_alignment_patterns(a), strlen(codes) - 3);
  plf_alignment_destroy(a);
}

static void test_protein_codes(void **state) {
  (void)state;
  const char *order = "ARNDCQEGHILKMFPSTWYV";
  char text[128];
  snprintf(text, sizeof text, ">x\n%sBZJX-?\n", order);
  plf_alignment *a = parse_ok(text, "t.fa", PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  assert_int_equal(plf_alignment_datatype(a), PLF_DATA_PROTEIN);
  for (int s = 0; s < 20; s++) assert_int_equal(mask_at(a, 0, s), 1u << s);
  assert_int_equal(mask_at(a, 0, 20), (1u << 3) | (1u << 2));  /* B = D|N */
  assert_int_equal(mask_at(a, 0, 21), (1u << 6) | (1u << 5));  /* Z = E|Q */
  assert_int_equal(mask_at(a, 0, 22), (1u << 9) | (1u << 10)); /* J = I|L */
  for (int s = 23; s < 26; s++)
    assert_int_equal(mask_at(a, 0, s), (1u << 20) - 1);
  plf_alignment_destroy(a);
}

/* ---- patterns, tips, frequencies ----------------------------------------- */
static void test_patterns(void **state) {
  (void)state;
  /* columns: 0 AA, 1 CC, 2 AA, 3 GT, 4 AA, 5 CC, 6 AN, 7 A- (= AN) */
  plf_alignment *a = parse_ok(">a\nACAGACAA\n>b\nACATACN-\n", "t.fa",
                              PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  assert_int_equal(plf_alignment_sites(a), 8);
  assert_int_equal(plf_alignment_patterns(a), 4);
  const double *w = plf_alignment_weights(a);
  assert_near(w[0], 3, 0);
  assert_near(w[1], 2, 0);
  assert_near(w[2], 1, 0);
  assert_near(w[3], 2, 0);
  const uint32_t *sp = plf_alignment_site_patterns(a);
  const uint32_t want[] = {0, 1, 0, 2, 0, 1, 3, 3};
  for (int s = 0; s < 8; s++) assert_int_equal(sp[s], want[s]);
  assert_int_equal(plf_alignment_mask(a, 1, 2), T);
  assert_int_equal(plf_alignment_mask(a, 1, 3), ANY4);
  assert_int_equal(plf_alignment_mask(a, 2, 0), 0); /* out of range */
  assert_int_equal(plf_alignment_mask(a, 0, 4), 0);
  /* constant: AA x3, CC x2, A? x2 (missing fits): 7 of 8 */
  assert_near(plf_alignment_constant_fraction(a), 7.0 / 8, 1e-15);
  plf_alignment_destroy(a);
}

static void test_tips(void **state) {
  (void)state;
  plf_alignment *a = parse_ok(">a\nACGTR-\n>b\nACGTAN\n>c\nACGTA?\n",
                              "t.fa", PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  size_t np = plf_alignment_patterns(a);
  assert_int_equal(np, 6);
  assert_int_equal(plf_alignment_tip_ambiguous(a, 0), 1);
  assert_int_equal(plf_alignment_tip_ambiguous(a, 1), 0);
  assert_int_equal(plf_alignment_tip_ambiguous(a, 3), EMBER_EINVAL);
  int states[6];
  assert_int_equal(plf_alignment_tip_states(a, 0, states), EMBER_EINVAL);
  assert_int_equal(plf_alignment_tip_states(a, 1, states), 0);
  const int want[] = {0, 1, 2, 3, 0, 4};
  for (int p = 0; p < 6; p++) assert_int_equal(states[p], want[p]);
  double part[6 * 4];
  assert_int_equal(plf_alignment_tip_partials(a, 0, part), 0);
  const double wantp[6 * 4] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0,
                               0, 0, 0, 1, 1, 0, 1, 0, 1, 1, 1, 1};
  for (int i = 0; i < 24; i++) assert_near(part[i], wantp[i], 0);
  assert_int_equal(plf_alignment_tip_partials(a, 9, part), EMBER_EINVAL);
  plf_alignment_destroy(a);
}

static void test_empirical_freqs(void **state) {
  (void)state;
  double f[20];
  plf_alignment *a = parse_ok(">a\nAACC\n>b\nGGTT\n>c\nN---\n", "t.fa",
                              PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  assert_int_equal(plf_alignment_empirical_freqs(a, f), 0);
  for (int s = 0; s < 4; s++) assert_near(f[s], 0.25, 1e-15);
  plf_alignment_destroy(a);
  /* R (A|G) shared in proportion: A 3, G 1, then R's share converges to
   * A 3/4 and G 1/4 of it: A = (3 + 3/4) / 5, G = (1 + 1/4) / 5 */
  a = parse_ok(">a\nAAAGR\n", "t.fa", PLF_FORMAT_AUTO, PLF_DATA_DNA);
  assert_int_equal(plf_alignment_empirical_freqs(a, f), 0);
  /* C and T are 0: raised to 1e-4, paid for by A (the largest) */
  assert_near(f[1], 1e-4, 1e-15);
  assert_near(f[3], 1e-4, 1e-15);
  assert_near(f[2], 1.25 / 5, 1e-9);
  assert_near(f[0], 3.75 / 5 - 2e-4, 1e-9);
  plf_alignment_destroy(a);
  /* only missing data: uniform */
  a = parse_ok(">a\nNN\n", "t.fa", PLF_FORMAT_AUTO, PLF_DATA_AUTO);
  assert_int_equal(plf_alignment_empirical_freqs(a, f), 0);
  for (int s = 0; s < 4; s++) assert_near(f[s], 0.25, 1e-15);
  plf_alignment_destroy(a);
}

/* ---- files --------------------------------------------------------------- */
static void test_files(void **state) {
  (void)state;
  char err[512];
  plf_alignment *a;
  /* PHYLIP sequential, one line per taxon */
  assert_int_equal(plf_alignment_read(DATA "example.phy", PLF_FORMAT_AUTO,
                                      PLF_DATA_AUTO, &a, err, sizeof err), 0);
  assert_int_equal(plf_alignment_taxa(a), 17);
  assert_int_equal(plf_alignment_sites(a), 1998);
  plf_alignment_destroy(a);
  /* PHYLIP interleaved, blocks of 60 in groups of 10 */
  assert_int_equal(plf_alignment_read(DATA "nucleic.phy", PLF_FORMAT_AUTO,
                                      PLF_DATA_AUTO, &a, err, sizeof err), 0);
  assert_int_equal(plf_alignment_taxa(a), 54);
  assert_int_equal(plf_alignment_sites(a), 886);
  plf_alignment_destroy(a);
  assert_int_equal(plf_alignment_read(DATA "protein/myoglobin.phy",
                                      PLF_FORMAT_AUTO, PLF_DATA_AUTO, &a, err,
                                      sizeof err), 0);
  assert_int_equal(plf_alignment_datatype(a), PLF_DATA_PROTEIN);
  assert_int_equal(plf_alignment_taxa(a), 100);
  assert_int_equal(plf_alignment_sites(a), 377);
  plf_alignment_destroy(a);

  assert_int_equal(plf_alignment_read("/nonexistent/x.phy", PLF_FORMAT_AUTO,
                                      PLF_DATA_AUTO, &a, err, sizeof err),
                   EMBER_EIO);
  assert_contains(err, "/nonexistent/x.phy: cannot open: ");
  assert_null(a);
  assert_int_equal(plf_alignment_read(DATA, PLF_FORMAT_AUTO, PLF_DATA_AUTO,
                                      &a, err, sizeof err), EMBER_EIO);
  assert_contains(err, "it is a directory");

  /* gzip'd (BGZF), with an error on its line */
  char path[] = "/tmp/test_plf_alignment_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  BGZF *z = bgzf_open(path, "w");
  assert_non_null(z);
  const char *text = "2 4\nalpha ACGT\nbeta ACGA\n";
  assert_int_equal(bgzf_write(z, text, strlen(text)), (ssize_t)strlen(text));
  assert_int_equal(bgzf_close(z), 0);
  assert_int_equal(plf_alignment_read(path, PLF_FORMAT_AUTO, PLF_DATA_AUTO,
                                      &a, err, sizeof err), 0);
  assert_int_equal(plf_alignment_sites(a), 4);
  plf_alignment_destroy(a);
  z = bgzf_open(path, "w");
  text = "2 4\nalpha ACGT\nbeta AC!A\n";
  assert_int_equal(bgzf_write(z, text, strlen(text)), (ssize_t)strlen(text));
  assert_int_equal(bgzf_close(z), 0);
  assert_int_equal(plf_alignment_read(path, PLF_FORMAT_AUTO, PLF_DATA_AUTO,
                                      &a, err, sizeof err), EMBER_EFORMAT);
  char want[128];
  snprintf(want, sizeof want, "%s:3: unknown character '!'", path);
  assert_contains(err, want);
  unlink(path);
  plf_alignment_destroy(NULL);
}

/* ---- allocation failures ------------------------------------------------- */
static void test_alloc_failures(void **state) {
  (void)state;
  const char *inputs[] = {
      "3 8\nalpha ACGT\nbeta  ACGT\ngamma ACGT\nACGT\nACGA\nACGR\n",
      ">a\nACGTACGA\n>b\nACGTRCGT\n",
      "#NEXUS\nbegin taxa; dimensions ntax=2; taxlabels a b; end;\n"
      "begin characters; dimensions nchar=4; format matchchar=.;\n"
      "matrix a ACGT b .C.A; end;\n"};
  for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
    int done = 0;
    for (int n = 1; !done && n < 10000; n++) {
      long live = alloc_live;
      alloc_count = 0;
      alloc_fail_at = n;
      plf_alignment *a = NULL;
      char err[256];
      int rc = plf_alignment_parse(inputs[i], strlen(inputs[i]), "t", 0, 0,
                                   &a, err, sizeof err);
      int calls = alloc_count;
      alloc_fail_at = 0;
      if (rc == 0) {
        assert_non_null(a);
        plf_alignment_destroy(a);
        done = calls < n; /* no failure was injected: all paths seen */
      } else {
        if (rc != EMBER_ENOMEM)
          fail_msg("input %zu, allocation %d failed: rc %d (%s)", i, n, rc,
                   err);
        assert_null(a);
        assert_contains(err, "out of memory");
      }
      if (alloc_live != live)
        fail_msg("input %zu, allocation %d failed: %ld blocks leaked", i, n,
                 alloc_live - live);
    }
    assert_true(done);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_phylip_sequential),
      cmocka_unit_test(test_phylip_interleaved),
      cmocka_unit_test(test_phylip_names),
      cmocka_unit_test(test_phylip_errors),
      cmocka_unit_test(test_fasta),
      cmocka_unit_test(test_fasta_errors),
      cmocka_unit_test(test_nexus),
      cmocka_unit_test(test_nexus_errors),
      cmocka_unit_test(test_nexus_primates),
      cmocka_unit_test(test_detect),
      cmocka_unit_test(test_dna_codes),
      cmocka_unit_test(test_protein_codes),
      cmocka_unit_test(test_patterns),
      cmocka_unit_test(test_tips),
      cmocka_unit_test(test_empirical_freqs),
      cmocka_unit_test(test_files),
      cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
