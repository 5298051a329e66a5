/*
 * sw_striped.h - the striped (Farrar 2007) Smith-Waterman pass with 16-bit
 * saturating lanes, written once for all vector widths. Not a normal
 * header: an ISA file (sw_sse41.c, sw_avx2.c, sw_avx512.c) defines sw_vec,
 * SW_LANES, SW_PASS_NAME and these helpers, then includes it:
 *
 *   v_zero() v_set1(x) v_load(p) v_store(p, v) v_adds(a, b) v_subs(a, b)
 *   v_max(a, b)          saturating signed 16-bit arithmetic
 *   v_any_gt(a, b)       true if a > b in some lane
 *   v_shift_lanes(v, d)  lane l takes lane l-d, lanes below d become 0
 *                        (d a power of two below SW_LANES)
 *   v_hmax(v)            the largest lane of a vector of lanes >= 0
 * and SW_LEVELS = log2(SW_LANES).
 *
 * Layout: with seg = ceil(m / SW_LANES) segments, query row i lives in lane
 * i / seg of segment i % seg, so one vector holds rows that are seg apart
 * and a column is seg vectors. Rows past the query end score INT16_MIN.
 *
 * Per reference column the main loop computes H and E exactly and F within
 * each lane's run of rows. F must then cross from each lane into the next.
 * Instead of Farrar's "lazy F" loop, which walks the carry down one lane
 * per round (slow when a long vertical gap cone crosses many lanes, as
 * below every well-aligned read), the carries into all lanes are found at
 * once with a log2(SW_LANES)-step max-plus scan across lanes, then one
 * pass applies them. It is written for any penalties (gap_open may be
 * below gap_extend, either may be 0): below its first row a carry c
 * decays by step = min(open, extend) per row, exact where it wins
 * (F(i+1) >= F(i) - extend and >= H(i) - open >= c - open), and H
 * corrected by F also updates E, so the pass is exact Gotoh.
 *
 * The best cell: the first column whose maximum strictly beats the best so
 * far is remembered (a copy of its H), and the smallest row holding the
 * best score in that column is read at the end: the end rule of sw.h.
 * Saturation: if the best reaches INT16_MAX - max_score, a sum may have
 * been clipped; the pass then gives up and returns false.
 */

/* carry_scan: x[l] is the carry lane l gets from lane l-1 alone; returns
 * max over t <= l of x[t] - (l - t) * decay, in SW_LEVELS doublings. */
static inline sw_vec carry_scan(sw_vec x, const sw_vec *vfill,
                                const sw_vec *vdecay) {
  x = v_max(x, v_subs(v_adds(v_shift_lanes(x, 1), vfill[0]), vdecay[0]));
  x = v_max(x, v_subs(v_adds(v_shift_lanes(x, 2), vfill[1]), vdecay[1]));
  x = v_max(x, v_subs(v_adds(v_shift_lanes(x, 4), vfill[2]), vdecay[2]));
#if SW_LEVELS > 3
  x = v_max(x, v_subs(v_adds(v_shift_lanes(x, 8), vfill[3]), vdecay[3]));
#endif
#if SW_LEVELS > 4
  x = v_max(x, v_subs(v_adds(v_shift_lanes(x, 16), vfill[4]), vdecay[4]));
#endif
  return x;
}

bool SW_PASS_NAME(void *mem, const acc_sw_scoring *s, const sw_seq *q,
                  const sw_seq *r, int32_t stop_at, sw_cell *out) {
  const int32_t m = q->len, n = r->len;
  const int32_t seg = (m + SW_LANES - 1) / SW_LANES;
  const int size = s->size;
  sw_vec *prof = mem;
  sw_vec *hcur = prof + (size_t)size * seg;
  sw_vec *hprev = hcur + seg;
  sw_vec *ev = hprev + seg;
  sw_vec *hmax = ev + seg;

  /* query profile. hmax (seg * SW_LANES * 2 bytes) holds the query codes
   * meanwhile, in striped order, with code size for the padding rows */
  uint8_t *qs = (uint8_t *)hmax;
  memset(qs, size, (size_t)seg * SW_LANES);
  for (int32_t i = 0, k = 0, l = 0; i < m; i++) {
    qs[k * SW_LANES + l] = (uint8_t)s->encode[q->res[(ptrdiff_t)i * q->dir]];
    if (++k == seg) {
      k = 0;
      l++;
    }
  }
  for (int c = 0; c < size; c++) {
    int16_t col[ACC_SW_MAX_ALPHABET + 1];
    for (int a = 0; a < size; a++) col[a] = (int16_t)s->matrix[a * size + c];
    col[size] = INT16_MIN;
    int16_t *p = (int16_t *)(prof + (size_t)c * seg);
    for (int32_t t = 0; t < seg * SW_LANES; t++) p[t] = col[qs[t]];
  }

  const int16_t open = (int16_t)(s->gap_open < INT16_MAX ? s->gap_open
                                                         : INT16_MAX);
  const int16_t ext = (int16_t)(s->gap_extend < INT16_MAX ? s->gap_extend
                                                          : INT16_MAX);
  const sw_vec vopen = v_set1(open), vext = v_set1(ext);
  const sw_vec vstep = v_set1((int16_t)(open < ext ? open : ext));
  const sw_vec vzero = v_zero(), vneg = v_set1(INT16_MIN);
  /* for the carry scan: vfill[lvl] is INT16_MIN in the 2^lvl lanes that
   * a shift by 2^lvl empties, vdecay[lvl] what 2^lvl lanes of seg rows
   * take off a carry (clipped: a carry that low can no longer matter) */
  const int32_t step = open < ext ? open : ext;
  sw_vec vfill[SW_LEVELS], vdecay[SW_LEVELS];
  for (int lvl = 0; lvl < SW_LEVELS; lvl++) {
    _Alignas(64) int16_t fill[SW_LANES];
    for (int l = 0; l < SW_LANES; l++) fill[l] = l < (1 << lvl) ? INT16_MIN : 0;
    vfill[lvl] = v_load((const sw_vec *)fill);
    int64_t d = (int64_t)step * seg << lvl;
    vdecay[lvl] = v_set1((int16_t)(d < INT16_MAX ? d : INT16_MAX));
  }
  const int32_t limit = INT16_MAX - (s->max_score > 0 ? s->max_score : 0);

  for (int32_t k = 0; k < seg; k++) {
    v_store(hcur + k, vzero);
    v_store(ev + k, vneg);
  }

  int32_t best = 0, best_j = -1;
  sw_vec vbest = vzero;
  for (int32_t j = 0; j < n; j++) {
    const uint8_t c = (uint8_t)s->encode[r->res[(ptrdiff_t)j * r->dir]];
    const sw_vec *pc = prof + (size_t)c * seg;
    sw_vec *t = hprev;
    hprev = hcur;
    hcur = t;

    /* main loop: H(i-1, j-1) for segment 0 comes from the previous lane */
    sw_vec vh = v_shift_lanes(v_load(hprev + seg - 1), 1);
    sw_vec vf = vneg, vcol = vzero;
    for (int32_t k = 0; k < seg; k++) {
      vh = v_adds(vh, v_load(pc + k));
      sw_vec ve = v_load(ev + k);
      vh = v_max(vh, ve);
      vh = v_max(vh, vf);
      vh = v_max(vh, vzero);
      v_store(hcur + k, vh);
      vcol = v_max(vcol, vh);
      sw_vec vo = v_subs(vh, vopen);
      v_store(ev + k, v_max(v_subs(ve, vext), vo));
      vf = v_max(v_subs(vf, vext), vo);
      vh = v_load(hprev + k);
    }

    /* F across lanes. The carry into lane l's first row obeys
     * C[l+1] = max(V[l], C[l] - seg * step), V[l] being the F that the
     * main loop left below lane l's last row: a max-plus prefix over
     * lanes, computed for all lanes at once by doubling. One pass down the
     * segments then applies each carry, decaying by step per row, until no
     * lane's carry can beat the F the main loop already used. */
    sw_vec vc = carry_scan(v_adds(v_shift_lanes(vf, 1), vfill[0]), vfill,
                           vdecay);
    for (int32_t k = 0; k < seg; k++) {
      /* branch-free: where the carry does not win these stores change
       * nothing */
      sw_vec hold = v_load(hcur + k);
      sw_vec hnew = v_max(hold, vc);
      v_store(hcur + k, hnew);
      vcol = v_max(vcol, hnew);
      v_store(ev + k, v_max(v_load(ev + k), v_subs(hnew, vopen)));
      vc = v_subs(vc, vstep);
      if (!v_any_gt(vc, v_subs(hold, vopen))) break;
    }

    if (v_any_gt(vcol, vbest)) {
      int32_t top = v_hmax(vcol);
      best = top;
      best_j = j;
      vbest = v_set1((int16_t)top);
      for (int32_t k = 0; k < seg; k++) v_store(hmax + k, v_load(hcur + k));
      if (best >= limit) return false;
      if (best >= stop_at) break;
    }
  }

  out->score = best;
  out->i = -1;
  out->j = -1;
  if (best == 0) return true;
  const int16_t *hm = (const int16_t *)hmax;
  for (int32_t l = 0; l < SW_LANES; l++)
    for (int32_t k = 0; k < seg; k++) {
      int32_t i = l * seg + k;
      if (i >= m) break;
      if (hm[k * SW_LANES + l] == best) {
        out->i = i;
        out->j = best_j;
        return true;
      }
    }
  return false; /* not reached: the best came from this column */
}
