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
 *   v_lookup(lo, hi, t)  lane l = t[lo[l]] or t[16 + hi[l]] (t: 32 int8;
 *                        a selector byte 0x80 contributes 0)
 * and SW_LEVELS = log2(SW_LANES).
 *
 * Layout: with seg = ceil(m / SW_LANES) segments, query row i lives in lane
 * i / seg of segment i % seg, so one vector holds rows that are seg apart
 * and a column is seg vectors.
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

  /* Query profile, built with table lookups: the query codes go in
   * striped order into two selector arrays (in hmax meanwhile, which holds
   * seg * SW_LANES * 2 bytes): sel_lo has codes 0-15, sel_hi codes 16-31
   * less 16, 0x80 (lookup gives 0) elsewhere. Padding rows score 0: they
   * come after every query row, so they cannot change a query row, and
   * they never exceed the best query cell so far, so never win a column. */
  uint8_t *sel_lo = (uint8_t *)hmax, *sel_hi = sel_lo + (size_t)seg * SW_LANES;
  memset(sel_lo, 0x80, (size_t)seg * SW_LANES * 2);
  for (int32_t i = 0, k = 0, l = 0; i < m; i++) {
    uint8_t code = (uint8_t)s->encode[q->res[(ptrdiff_t)i * q->dir]];
    if (code < 16)
      sel_lo[k * SW_LANES + l] = code;
    else
      sel_hi[k * SW_LANES + l] = (uint8_t)(code - 16);
    if (++k == seg) {
      k = 0;
      l++;
    }
  }
  for (int c = 0; c < size; c++) {
    int8_t tab[32] = {0};
    for (int a = 0; a < size; a++) tab[a] = (int8_t)s->matrix[a * size + c];
    sw_vec *p = prof + (size_t)c * seg;
    for (int32_t k = 0; k < seg; k++)
      v_store(p + k, v_lookup(sel_lo + (size_t)k * SW_LANES,
                              sel_hi + (size_t)k * SW_LANES, tab));
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

  /* Without a target (the forward pass) every column that beats the best
   * is copied to hmax. With one (the reverse pass, whose target is the
   * forward score, so below limit) only the first column reaching it
   * matters: no copies, one compare per column; if no column reaches the
   * target the pass reports score 0. */
  const bool target = stop_at < limit;
  const sw_vec vtarget = v_set1((int16_t)(target ? stop_at - 1 : 0));
  const sw_vec *hfound = hmax;
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
    sw_vec vc = v_adds(v_shift_lanes(vf, 1), vfill[0]);
    /* With open >= extend a carry that loses at its first row loses at
     * every row below, since F falls at least as fast from there; if all
     * lanes' direct carries lose, so do the scanned ones: skip (the usual
     * case away from the alignment). */
    if (open >= ext &&
        !v_any_gt(v_subs(vc, vstep), v_subs(v_load(hcur), vopen)))
      goto carried;
    vc = carry_scan(vc, vfill, vdecay);
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
  carried:

    if (target) {
      if (v_any_gt(vcol, vtarget)) {
        best = v_hmax(vcol);
        best_j = j;
        hfound = hcur;
        break;
      }
    } else if (v_any_gt(vcol, vbest)) {
      best = v_hmax(vcol);
      best_j = j;
      vbest = v_set1((int16_t)best);
      if (best >= limit) return false;
      if (best >= stop_at) {
        hfound = hcur;
        break;
      }
      for (int32_t k = 0; k < seg; k++) v_store(hmax + k, v_load(hcur + k));
    }
  }

  out->score = best;
  out->i = -1;
  out->j = -1;
  if (best == 0) return true;
  const int16_t *hm = (const int16_t *)hfound;
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
