/*
 * sw.cl - batched Smith-Waterman on OpenCL (OpenCL C 1.2): the same
 * recurrences, 32-bit scores and tie rules as the scalar reference
 * (sw_scalar.c, sw.h), laid out after ADEPT's design.
 *
 * One work-group aligns one pair. Work-item t owns query row i0 + t of a
 * tile of WG rows (WG = the local size) and walks along the reference; the
 * tile advances as an anti-diagonal wavefront: at step s, item t computes
 * cell (i0 + t, s - t). Only the previous row's H and F cross items, through
 * two local buffers used alternately (the last two diagonals); each item
 * keeps H(i, j-1), E(i, j) and the diagonal value in registers. A query
 * longer than WG is done tile after tile: the last row of a tile is kept in
 * global scratch (one H and one F per reference position) for the first
 * item of the next tile.
 *
 * Each item keeps its best cell; a work-group reduction then picks the best
 * score, then the smallest reference position j, then the smallest query
 * position i (sw.h's end rule: the first cell, scanning column by column,
 * that strictly beats the best so far).
 *
 * Unlike ADEPT, the roles are never swapped (the query is always the row
 * dimension, whatever the lengths), so the tie rules stay the CPU's; long
 * queries are handled by the tiles instead.
 *
 * Sequences are read in place from the two input blocks as the client
 * built them (ESQ1, seqset.h: magic, count, count + 1 offsets, raw residue
 * letters; little-endian, the buffer 4-byte aligned at offset 0), so that a
 * block the NAM keeps on the device serves many tasks unchanged. Letters
 * are encoded on the device through a 256-entry table: a query letter once
 * per row; reference letters index a local table of scores by (query
 * index, raw reference letter), the matrix composed with the table, so a
 * cell costs one local read as with pre-encoded residues.
 *
 * sw_forward aligns query p with reference p. sw_reverse scores the
 * reversed prefixes q[0..qend], r[0..rend] of the forward end with the same
 * pass: its best cell under the same rule gives the start. (The CPU's
 * reverse pass stops at the first column reaching the forward score; no
 * cell of the reversed matrix exceeds it, so the full pass picks the same
 * cell.)
 *
 * Every barrier sits in control flow that is uniform over the group: loop
 * bounds depend only on the pair, and no kernel returns early.
 *
 *   E(i,j) = max(E(i,j-1) - extend, H(i,j-1) - open)
 *   F(i,j) = max(F(i-1,j) - extend, H(i-1,j) - open)
 *   H(i,j) = max(0, H(i-1,j-1) + score(q_i, r_j), E(i,j), F(i,j))
 */
#define NEG (INT_MIN / 2)
#define MAX_ALPHABET 32
#define LETTERS 256

typedef struct cell {
  int score, i, j;
} cell;

/* better: does (v, i, j) come before the best (b) under the end rule? */
static bool better(int v, int i, int j, cell b) {
  if (v != b.score) return v > b.score;
  if (v <= 0) return false;
  return j < b.j || (j == b.j && i < b.i);
}

/* pass: one local-alignment pass of q (m residues, read at q[k * dir])
 * against r (n residues, read at r[k * dir]), raw letters. lsc holds the
 * scores by (query index, reference letter) (load_tables), xh and xf
 * 2 * WG ints each (reused for the reduction). Every item of the group
 * returns the best cell. */
static cell pass(__global const uchar *q, int m, __global const uchar *r,
                 int n, int dir, int open, int ext,
                 __constant const uchar *encode, __local const char *lsc,
                 __local int *xh, __local int *xf, __global int *bh,
                 __global int *bf) {
  const int t = (int)get_local_id(0);
  const int wg = (int)get_local_size(0);
  cell best = {0, -1, -1};

  for (int i0 = 0; i0 < m; i0 += wg) {
    const int rows = min(wg, m - i0);
    const int i = i0 + t;
    const bool row_on = t < rows;
    const bool first_tile = i0 == 0;
    const bool keep_row = t == rows - 1 && i0 + wg < m;  /* feeds next tile */
    const int qrow = row_on ? (int)encode[q[(long)i * dir]] * LETTERS : 0;
    int hleft = 0, e = NEG, diag = 0;
    const int steps = n + rows - 1;
    for (int s = 0; s < steps; s++) {
      const int j = s - t;
      if (row_on && j >= 0 && j < n) {
        int up, fup;
        if (t == 0) {
          up = first_tile ? 0 : bh[j];
          fup = first_tile ? NEG : bf[j];
        } else {
          up = xh[((s - 1) & 1) * wg + t - 1];
          fup = xf[((s - 1) & 1) * wg + t - 1];
        }
        const int sc = (int)lsc[qrow + (int)r[(long)j * dir]];
        const int ev = max(e - ext, hleft - open);
        const int fv = max(fup - ext, up - open);
        const int hv = max(max(diag + sc, 0), max(ev, fv));
        xh[(s & 1) * wg + t] = hv;
        xf[(s & 1) * wg + t] = fv;
        if (keep_row) {
          bh[j] = hv;
          bf[j] = fv;
        }
        diag = up;
        hleft = hv;
        e = ev;
        if (better(hv, i, j, best)) {
          best.score = hv;
          best.i = i;
          best.j = j;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    }
  }

  /* reduction over the group: xh = score, xf = i, xf + wg = j */
  xh[t] = best.score;
  xf[t] = best.i;
  xf[wg + t] = best.j;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int stride = wg / 2; stride > 0; stride /= 2) {
    if (t < stride) {
      cell mine = {xh[t], xf[t], xf[wg + t]};
      const int v = xh[t + stride], oi = xf[t + stride];
      const int oj = xf[wg + t + stride];
      if (better(v, oi, oj, mine)) {
        xh[t] = v;
        xf[t] = oi;
        xf[wg + t] = oj;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  cell out = {xh[0], xf[0], xf[wg]};
  barrier(CLK_LOCAL_MEM_FENCE);
  return out;
}

/* load_tables: lsc[a * LETTERS + c] = score of query index a against
 * reference letter c, the matrix (scores in [-128, 127], checked by the
 * host) composed with encode. encode maps every byte to an index below
 * size (the host maps letters the scoring rejects to 0; tasks are
 * validated before they get here). */
static void load_tables(__constant const int *matrix,
                        __constant const uchar *encode, int size,
                        __local char *lsc) {
  const int t = (int)get_local_id(0);
  const int wg = (int)get_local_size(0);
  for (int k = t; k < size * LETTERS; k += wg)
    lsc[k] = (char)matrix[(k / LETTERS) * size + (int)encode[k % LETTERS]];
  barrier(CLK_LOCAL_MEM_FENCE);
}

/* Sequence p of an ESQ1 block: its residues start at
 * residues(blk) + blk[2 + p] and end at residues(blk) + blk[3 + p]. */
static __global const uchar *residues(__global const uint *blk) {
  return (__global const uchar *)(blk + 3 + blk[1]);
}

/* Pairs are launched by classes of query length, one work-group size per
 * class: group g of a launch aligns pair order[first + g].
 *
 * sw_forward: best cell of pair p (score, i, j) into fwd[3p .. 3p+2].
 * qblk/rblk: the query and reference blocks; scratch: two ints per
 * reference residue (at 2 * the reference's offset), used only by queries
 * longer than the work-group. */
__kernel void sw_forward(__global const uint *qblk,
                         __global const uint *rblk,
                         __constant const int *matrix,
                         __constant const uchar *encode, int size, int open,
                         int ext, __global int *scratch, __global int *fwd,
                         __global const uint *order, uint first,
                         __local int *xh, __local int *xf) {
  __local char lsc[MAX_ALPHABET * LETTERS];
  const uint p = order[first + get_group_id(0)];
  load_tables(matrix, encode, size, lsc);
  const uint qa = qblk[2 + p], ra = rblk[2 + p];
  const int m = (int)(qblk[3 + p] - qa), n = (int)(rblk[3 + p] - ra);
  __global int *bh = scratch + 2 * (ulong)ra;
  cell c = pass(residues(qblk) + qa, m, residues(rblk) + ra, n, 1, open,
                ext, encode, lsc, xh, xf, bh, bh + n);
  if (get_local_id(0) == 0) {
    fwd[3 * (ulong)p] = c.score;
    fwd[3 * (ulong)p + 1] = c.i;
    fwd[3 * (ulong)p + 2] = c.j;
  }
}

/* sw_reverse: the start of pair p from its forward end; hit[5p .. 5p+4] =
 * score, query start, query end, reference start, reference end (score 0:
 * coordinates -1). A reverse best that differs from the forward score
 * (which cannot happen) is reported as score -1. */
__kernel void sw_reverse(__global const uint *qblk,
                         __global const uint *rblk,
                         __constant const int *matrix,
                         __constant const uchar *encode, int size, int open,
                         int ext, __global int *scratch,
                         __global const int *fwd, __global int *hit,
                         __global const uint *order, uint first,
                         __local int *xh, __local int *xf) {
  __local char lsc[MAX_ALPHABET * LETTERS];
  const uint p = order[first + get_group_id(0)];
  __global int *h = hit + 5 * (ulong)p;
  const int score = fwd[3 * (ulong)p];
  const int fi = fwd[3 * (ulong)p + 1], fj = fwd[3 * (ulong)p + 2];
  /* no early return: every item must reach every barrier; a pair without
   * a positive score runs an empty pass */
  const bool on = score > 0;
  load_tables(matrix, encode, size, lsc);
  const uint qa = qblk[2 + p], ra = rblk[2 + p];
  __global int *bh = scratch + 2 * (ulong)ra;
  const int m = on ? fi + 1 : 0, n = on ? fj + 1 : 0;
  cell c = pass(residues(qblk) + qa + (on ? fi : 0), m,
                residues(rblk) + ra + (on ? fj : 0), n, -1, open, ext, encode,
                lsc, xh, xf, bh, bh + n);
  if (get_local_id(0) == 0 && !on) {
    h[0] = 0;
    h[1] = h[2] = h[3] = h[4] = -1;
  } else if (get_local_id(0) == 0) {
    h[0] = c.score == score ? score : -1;
    h[1] = fi - c.i;
    h[2] = fi;
    h[3] = fj - c.j;
    h[4] = fj;
  }
}
