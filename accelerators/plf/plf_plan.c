/*
 * plf_plan.c - the planner: subtree hashes, the slot book, largest-subtree
 * first traversal without recursion, minimum-recomputation-cost eviction,
 * and the lookahead over a batch that tells it which vectors cost nothing
 * to lose.
 *
 * Per tree:
 *   describe  hash every subtree, with its size and its slot need (how
 *             many slots computing it takes at most: need(v) = max(need(a),
 *             1 + need(b), 1 + [a internal] + [b internal]) for the larger
 *             child a and the smaller b, at most floor(log2 n) + 1). A
 *             tree differing from the last one described in a few nodes
 *             (an NNI neighbour) is redone from those nodes up only.
 *   mark      walk down from the root to the resident vectors the tree
 *             needs (not below another resident one): what eviction must
 *             spare first.
 *   walk      from the root with an explicit stack, larger child first. A
 *             resident node is a hit; otherwise its children are obtained
 *             and pinned, a slot is taken (a never-used one, else the
 *             cheapest to lose, plf_plan.h) and the op is emitted. Before
 *             walking into the larger child while the smaller one is
 *             resident, the smaller one is pinned when the budget leaves
 *             room for it, so that the walk does not evict what it is
 *             about to read.
 *
 * Per batch (bounded planners): foresee plans the batch as an unbounded
 * planner would, with a set of keys instead of slots, and records which
 * tree would read which vector; eviction then knows which resident vectors
 * the rest of the batch reads, and when. The batch is cut into windows so
 * that this set stays within 2(n-1) (at least 65536) keys beyond the slots.
 *
 * Nothing is allocated while a tree is planned: the plan's arrays are
 * reserved for the worst case first (a pass computes each node at most
 * once: n-1 ops, 2n-2 matrices), so a failure never leaves half a tree.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "plf_plan.h"
#include "plf_tree_internal.h"

typedef struct key128 {
  uint64_t a, b;
} key128;

/* a read the lookahead foresees: tree (in the window) reads key */
typedef struct foreseen {
  key128 key;
  int tree;
} foreseen;

/* an eviction candidate of a scan, cheapest first */
#define CANDIDATES 64
typedef struct candidate {
  uint64_t hi, lo;
  int slot;
} candidate;

typedef struct frame {
  int node;
  int stage;   /* 0 enter, 1 larger child done, 2 smaller child done */
  int buf[2];  /* the children's partials buffers, by child position */
  int early;   /* slot of the smaller child pinned early, or -1 */
} frame;

struct plf_planner {
  int tips, max;          /* max: 0 when unbounded */
  unsigned flags;
  int cap, used, high;    /* slots allocated, handed out, most ever used */
  /* per slot */
  key128 *skey;
  int *stips;
  uint64_t *slast;        /* stamp of the last tree that used it */
  uint32_t *smemb;        /* how many trees used it since it was computed */
  uint64_t *sneed;        /* stamp of the tree that still needs it */
  unsigned char *spin;
  int pinned;
  int *table;             /* key -> slot, open addressing */
  size_t tmask;
  /* keys evicted lately (for the recomputed count): a ring and its index */
  key128 *hkey;
  unsigned char *hvalid;
  size_t hcap, hnext;
  int *htable;
  size_t hmask;
  /* per node of the tree being planned */
  key128 *nkey;
  int *ntips, *nneed, *order;
  unsigned char *nfirst;  /* the child walked first (the larger) */
  unsigned char *ncanon;  /* the child written first in the op */
  uint64_t *mstamp;       /* matrix emitted in this segment */
  /* the tree last described, to describe the next one by its differences */
  int *schild;            /* [2 * (2n-1)] */
  uint64_t *slen;         /* [2n-1]: length bits */
  int snap_root;          /* PLF_NONE: no tree described yet */
  frame *stack;
  uint64_t stamp;
  plf_plan_counts totals;
  /* lookahead over a window of the batch (bounded planners): the keys an
   * unbounded planner would have by then (a set), the reads it would make,
   * sorted by key then tree, and per slot the next tree to read it */
  key128 *wkey;
  int *wcells;
  size_t wmask, wcount, wcap;
  foreseen *reads;
  size_t nreads;
  int window;             /* trees in the window; 0: no lookahead */
  int cur;                /* the window's tree being planned */
  int *snext;             /* per slot: next reader, -1 unknown */
  /* the cheapest tier-0 victims of the last scan, valid during one tree */
  candidate cand[CANDIDATES];
  int ncand, icand;
  uint64_t cand_stamp;
};

/* ---- hashing -------------------------------------------------------------- */

static uint64_t mix_a(uint64_t x) { /* splitmix64's finalizer */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t mix_b(uint64_t x) { /* murmur3's fmix64 */
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

static uint64_t length_bits(double d) {
  d += 0.0; /* -0 as 0 */
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static key128 tip_key(int taxon) {
  uint64_t x = (uint64_t)taxon;
  return (key128){mix_a(x * 2 + 0x9e3779b97f4a7c15ull),
                  mix_b(x ^ 0x5851f42d4c957f2dull)};
}

/* precedes: the canonical order of (key, length) pairs */
static int precedes(key128 x, uint64_t lx, key128 y, uint64_t ly) {
  if (x.a != y.a) return x.a < y.a;
  if (x.b != y.b) return x.b < y.b;
  return lx < ly;
}

static key128 join_key(key128 x, uint64_t lx, key128 y, uint64_t ly) {
  uint64_t w[6] = {x.a, x.b, lx, y.a, y.b, ly};
  uint64_t a = 0x243f6a8885a308d3ull, b = 0x13198a2e03707344ull;
  for (int i = 0; i < 6; i++) {
    a = mix_a(a ^ w[i]) + 0x9e3779b97f4a7c15ull;
    b = mix_b(b + w[5 - i]) ^ 0xa4093822299f31d0ull;
  }
  return (key128){a, b};
}

static int key_eq(key128 x, key128 y) { return x.a == y.a && x.b == y.b; }

/* ---- open-addressing index over an array of keys ------------------------- */

static int ix_find(const int *cells, size_t mask, const key128 *keys,
                   key128 k) {
  for (size_t i = k.a & mask;; i = (i + 1) & mask) {
    int id = cells[i];
    if (id < 0 || key_eq(keys[id], k)) return id;
  }
}

static void ix_insert(int *cells, size_t mask, const key128 *keys, int id) {
  size_t i = keys[id].a & mask;
  while (cells[i] >= 0) i = (i + 1) & mask;
  cells[i] = id;
}

/* ix_remove: removes id, shifting back the cells that probed past it */
static void ix_remove(int *cells, size_t mask, const key128 *keys, int id) {
  size_t i = keys[id].a & mask;
  while (cells[i] != id) i = (i + 1) & mask;
  for (size_t j = i;;) {
    j = (j + 1) & mask;
    if (cells[j] < 0) break;
    size_t h = keys[cells[j]].a & mask;
    int stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
    if (!stays) {
      cells[i] = cells[j];
      i = j;
    }
  }
  cells[i] = -1;
}

static size_t pow2_at_least(size_t n) {
  size_t c = 16;
  while (c < n) c *= 2;
  return c;
}

/* ---- the eviction history -------------------------------------------------- */

static void history_add(plf_planner *p, key128 k) {
  size_t i = p->hnext;
  p->hnext = (p->hnext + 1) % p->hcap;
  if (p->hvalid[i]) ix_remove(p->htable, p->hmask, p->hkey, (int)i);
  p->hkey[i] = k;
  p->hvalid[i] = 1;
  ix_insert(p->htable, p->hmask, p->hkey, (int)i);
}

static int history_take(plf_planner *p, key128 k) {
  int i = ix_find(p->htable, p->hmask, p->hkey, k);
  if (i < 0) return 0;
  ix_remove(p->htable, p->hmask, p->hkey, i);
  p->hvalid[i] = 0;
  return 1;
}

/* ---- plans ----------------------------------------------------------------- */

void plf_plan_init(plf_plan *plan) {
  if (plan) memset(plan, 0, sizeof *plan);
}

void plf_plan_clear(plf_plan *plan) {
  if (!plan) return;
  plan->op_count = plan->matrix_count = plan->tree_count = 0;
}

void plf_plan_free(plf_plan *plan) {
  if (!plan) return;
  free(plan->ops);
  free(plan->matrices);
  free(plan->trees);
  plf_plan_init(plan);
}

static int grow(void **arr, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 16;
  while (c < need) c *= 2;
  void *n = realloc(*arr, c * size);
  if (!n) return EMBER_ENOMEM;
  *arr = n;
  *cap = c;
  return 0;
}

static int plan_reserve(plf_plan *plan, int tips) {
  size_t n = (size_t)tips;
  if (grow((void **)&plan->ops, &plan->op_cap, plan->op_count + n - 1,
           sizeof *plan->ops) ||
      grow((void **)&plan->matrices, &plan->matrix_cap,
           plan->matrix_count + 2 * n - 2, sizeof *plan->matrices) ||
      grow((void **)&plan->trees, &plan->tree_cap, plan->tree_count + 1,
           sizeof *plan->trees))
    return EMBER_ENOMEM;
  return 0;
}

/* ---- the planner ------------------------------------------------------------ */

int plf_plan_min_vectors(int tip_count) {
  if (tip_count < 2 || tip_count > PLF_TREE_MAX_TIPS) return EMBER_EPARAM;
  int k = 0;
  while ((1 << k) < tip_count) k++;
  return k + 2;
}

/* grow_slots: room for cap slots (the slot arrays and the key index) */
static int grow_slots(plf_planner *p, int cap) {
  if (cap <= p->cap) return 0;
  size_t c = (size_t)cap;
  key128 *skey = realloc(p->skey, c * sizeof *skey);
  if (skey) p->skey = skey;
  int *stips = realloc(p->stips, c * sizeof *stips);
  if (stips) p->stips = stips;
  uint64_t *slast = realloc(p->slast, c * sizeof *slast);
  if (slast) p->slast = slast;
  uint64_t *sneed = realloc(p->sneed, c * sizeof *sneed);
  if (sneed) p->sneed = sneed;
  unsigned char *spin = realloc(p->spin, c * sizeof *spin);
  if (spin) p->spin = spin;
  uint32_t *smemb = realloc(p->smemb, c * sizeof *smemb);
  if (smemb) p->smemb = smemb;
  int *snext = realloc(p->snext, c * sizeof *snext);
  if (snext) p->snext = snext;
  size_t tcap = pow2_at_least(2 * c);
  int *table = malloc(tcap * sizeof *table);
  if (!skey || !stips || !slast || !sneed || !spin || !smemb || !snext ||
      !table) {
    free(table);
    return EMBER_ENOMEM;
  }
  memset(table, 0xff, tcap * sizeof *table);
  for (int s = 0; s < p->used; s++) /* every used slot holds a vector */
    ix_insert(table, tcap - 1, p->skey, s);
  free(p->table);
  p->table = table;
  p->tmask = tcap - 1;
  p->cap = cap;
  return 0;
}

void plf_planner_destroy(plf_planner *p) {
  if (!p) return;
  free(p->skey);
  free(p->stips);
  free(p->slast);
  free(p->sneed);
  free(p->spin);
  free(p->smemb);
  free(p->snext);
  free(p->table);
  free(p->wkey);
  free(p->wcells);
  free(p->reads);
  free(p->hkey);
  free(p->hvalid);
  free(p->htable);
  free(p->nkey);
  free(p->ntips);
  free(p->nneed);
  free(p->order);
  free(p->nfirst);
  free(p->ncanon);
  free(p->mstamp);
  free(p->schild);
  free(p->slen);
  free(p->stack);
  free(p);
}

int plf_planner_create(int tip_count, int max_vectors, unsigned flags,
                       plf_planner **out) {
  if (!out) return EMBER_EPARAM;
  *out = NULL;
  int min = plf_plan_min_vectors(tip_count);
  if (min < 0 || (flags & ~PLF_PLAN_NO_SCALING) ||
      (max_vectors != PLF_PLAN_UNBOUNDED && max_vectors < min))
    return EMBER_EPARAM;
  plf_planner *p = calloc(1, sizeof *p);
  if (!p) return EMBER_ENOMEM;
  p->tips = tip_count;
  p->max = max_vectors;
  p->flags = flags;
  size_t nodes = 2 * (size_t)tip_count - 1;
  p->nkey = malloc(nodes * sizeof *p->nkey);
  p->ntips = malloc(nodes * sizeof *p->ntips);
  p->nneed = malloc(nodes * sizeof *p->nneed);
  p->order = malloc(nodes * sizeof *p->order);
  p->nfirst = malloc(nodes);
  p->ncanon = malloc(nodes);
  p->mstamp = calloc(nodes, sizeof *p->mstamp);
  p->schild = malloc(2 * nodes * sizeof *p->schild);
  p->slen = malloc(nodes * sizeof *p->slen);
  p->snap_root = PLF_NONE;
  p->stack = malloc(nodes * sizeof *p->stack);
  p->hcap = max_vectors ? 16 * (size_t)max_vectors : 0;
  if (p->hcap < 4096) p->hcap = 4096;
  size_t hcells = pow2_at_least(2 * p->hcap);
  p->hkey = malloc(p->hcap * sizeof *p->hkey);
  p->hvalid = calloc(p->hcap, 1);
  p->htable = malloc(hcells * sizeof *p->htable);
  p->hmask = hcells - 1;
  if (!p->nkey || !p->ntips || !p->nneed || !p->order || !p->nfirst ||
      !p->ncanon || !p->mstamp || !p->schild || !p->slen || !p->stack ||
      !p->hkey ||
      !p->hvalid || !p->htable ||
      grow_slots(p, max_vectors ? max_vectors : tip_count - 1) != 0) {
    plf_planner_destroy(p);
    return EMBER_ENOMEM;
  }
  memset(p->htable, 0xff, hcells * sizeof *p->htable);
  *out = p;
  return 0;
}

void plf_planner_reset(plf_planner *p) {
  if (!p) return;
  memset(p->table, 0xff, (p->tmask + 1) * sizeof *p->table);
  memset(p->htable, 0xff, (p->hmask + 1) * sizeof *p->htable);
  memset(p->hvalid, 0, p->hcap);
  p->hnext = 0;
  p->cand_stamp = 0;
  memset(p->spin, 0, (size_t)p->cap);
  p->used = 0;
  p->pinned = 0;
}

int plf_planner_vectors(const plf_planner *p) { return p ? p->high : 0; }

int plf_planner_matrices(const plf_planner *p) {
  return p ? 2 * p->tips - 1 : 0;
}

void plf_planner_counts(const plf_planner *p, plf_plan_counts *out) {
  if (!out) return;
  if (p)
    *out = p->totals;
  else
    memset(out, 0, sizeof *out);
}

/* ---- one tree --------------------------------------------------------------- */

/* describe_node: internal node v's hash, size, need and child orders from
 * its children's */
static void describe_node(plf_planner *p, const plf_tree *t, int v) {
  int c0 = t->child[2 * v], c1 = t->child[2 * v + 1];
  uint64_t l0 = length_bits(t->length[c0]), l1 = length_bits(t->length[c1]);
  int canon = precedes(p->nkey[c1], l1, p->nkey[c0], l0); /* 1: c1 first */
  p->ncanon[v] = (unsigned char)canon;
  p->nkey[v] = canon ? join_key(p->nkey[c1], l1, p->nkey[c0], l0)
                     : join_key(p->nkey[c0], l0, p->nkey[c1], l1);
  p->ntips[v] = p->ntips[c0] + p->ntips[c1];
  int first = p->ntips[c0] != p->ntips[c1] ? p->ntips[c1] > p->ntips[c0]
                                            : canon;
  p->nfirst[v] = (unsigned char)first;
  int a = first ? c1 : c0, b = first ? c0 : c1;
  int need = p->nneed[a];
  if (1 + p->nneed[b] > need) need = 1 + p->nneed[b];
  int both = 1 + (a >= t->tips) + (b >= t->tips);
  p->nneed[v] = both > need ? both : need;
}

/* describe: hashes, sizes, needs and child orders of every node. A tree
 * that differs from the one described last in a few places (an NNI
 * neighbour, a branch length) is redone from those places up to the root
 * only; any other tree, bottom up in full. */
static void describe(plf_planner *p, const plf_tree *t) {
  int n = t->tips, total = 2 * n - 1, changed = 0;
  if (p->snap_root == t->root) {
    for (int u = 0; u < total && changed <= total / 8; u++) {
      uint64_t bits = length_bits(t->length[u]);
      if (bits != p->slen[u]) {
        p->slen[u] = bits;
        if (t->parent[u] != PLF_NONE) p->order[changed++] = t->parent[u];
      }
      if (u >= n && (t->child[2 * u] != p->schild[2 * u] ||
                     t->child[2 * u + 1] != p->schild[2 * u + 1])) {
        p->schild[2 * u] = t->child[2 * u];
        p->schild[2 * u + 1] = t->child[2 * u + 1];
        p->order[changed++] = u;
      }
    }
    if (changed <= total / 8) {
      /* every walk goes to the root, so a node below another changed one
       * is redone with its final children last */
      for (int i = 0; i < changed; i++)
        for (int v = p->order[i]; v != PLF_NONE; v = t->parent[v])
          describe_node(p, t, v);
      return;
    }
  }
  plf_tree_bottom_up(t, p->order);
  for (int i = 0; i < total; i++) {
    int v = p->order[i];
    if (v < n) {
      p->nkey[v] = tip_key(v);
      p->ntips[v] = 1;
      p->nneed[v] = 0;
    } else {
      describe_node(p, t, v);
    }
  }
  memcpy(p->schild, t->child, 2 * (size_t)total * sizeof *p->schild);
  for (int u = 0; u < total; u++) p->slen[u] = length_bits(t->length[u]);
  p->snap_root = t->root;
}

/* mark: the resident vectors the tree needs (those not below another
 * resident vector), walked down from the root over the nodes it needs */
static void mark(plf_planner *p, const plf_tree *t) {
  int sp = 0;
  p->order[sp++] = t->root;
  while (sp > 0) {
    int v = p->order[--sp];
    if (v < t->tips) continue;
    int s = ix_find(p->table, p->tmask, p->skey, p->nkey[v]);
    if (s >= 0) {
      p->sneed[s] = p->stamp;
    } else {
      p->order[sp++] = t->child[2 * v];
      p->order[sp++] = t->child[2 * v + 1];
    }
  }
}

/* touch: slot s is used by the tree being planned */
static void touch(plf_planner *p, int s) {
  if (p->slast[s] != p->stamp && p->smemb[s] < UINT32_MAX) p->smemb[s]++;
  p->slast[s] = p->stamp;
}

static void pin(plf_planner *p, int s) {
  p->spin[s] = 1;
  p->pinned++;
}

static void unpin(plf_planner *p, int s) {
  p->spin[s] = 0;
  p->sneed[s] = 0; /* read: this tree needs it no more */
  p->pinned--;
}

/* next_read: the first tree of the window after the current one that
 * reads key, or INT_MAX */
static int next_read(const plf_planner *p, key128 k) {
  size_t lo = 0, hi = p->nreads;
  while (lo < hi) { /* the first read >= (k, cur + 1) */
    size_t mid = lo + (hi - lo) / 2;
    const foreseen *r = &p->reads[mid];
    int before = r->key.a != k.a   ? r->key.a < k.a
                 : r->key.b != k.b ? r->key.b < k.b
                                   : r->tree <= p->cur;
    if (before)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < p->nreads && key_eq(p->reads[lo].key, k)) return p->reads[lo].tree;
  return INT_MAX;
}

/* cost: slot s's cost to lose (plf_plan.h) as (hi, lo), the tier in hi's
 * top bits:
 *   0  not used by this tree, no read foreseen: by how many trees used it
 *      (one-off vectors first), then age, then size;
 *   1  used by this tree, not needed by it, no read foreseen: by size;
 *   2  read by a later tree of the window: by size, then the later read
 *      first;
 *   3  needed by this tree: by size. */
static void cost(plf_planner *p, int s, uint64_t *hi, uint64_t *lo) {
  uint64_t size = (uint64_t)p->stips[s];
  if (p->sneed[s] == p->stamp) {
    *hi = 3ull << 62;
    *lo = size;
    return;
  }
  int next = INT_MAX;
  if (p->window) {
    if (p->snext[s] <= p->cur) p->snext[s] = next_read(p, p->skey[s]);
    next = p->snext[s];
  }
  if (next != INT_MAX) {
    *hi = 2ull << 62;
    *lo = (size << 32) | (uint64_t)(INT_MAX - next);
  } else if (p->slast[s] != p->stamp) {
    uint64_t age = p->slast[s] < (1ull << 40) ? p->slast[s] : 1ull << 40;
    *hi = p->smemb[s];
    *lo = (age << 21) | size;
  } else {
    *hi = 1ull << 62;
    *lo = size;
  }
}

static int cheaper(uint64_t hi, uint64_t lo, int s, const candidate *c) {
  return hi != c->hi ? hi < c->hi : lo != c->lo ? lo < c->lo : s < c->slot;
}

/* victim: the unpinned slot cheapest to lose, or -1. A scan keeps the
 * CANDIDATES cheapest tier-0 slots: no slot enters tier 0 while a tree is
 * planned (only touching one, which takes it out, changes a cost), so the
 * next evictions of the tree take them in order, skipping those touched
 * since, without scanning again. */
static int victim(plf_planner *p) {
  if (p->cand_stamp == p->stamp)
    while (p->icand < p->ncand) {
      int s = p->cand[p->icand++].slot;
      if (!p->spin[s] && p->slast[s] != p->stamp) return s;
    }
  int n = 0;
  candidate best = {UINT64_MAX, UINT64_MAX, -1};
  for (int s = 0; s < p->used; s++) {
    if (p->spin[s]) continue;
    uint64_t hi, lo;
    cost(p, s, &hi, &lo);
    if (cheaper(hi, lo, s, &best)) best = (candidate){hi, lo, s};
    if (hi >= 1ull << 62 ||
        (n == CANDIDATES && !cheaper(hi, lo, s, &p->cand[n - 1])))
      continue;
    int i = n < CANDIDATES ? n++ : n - 1; /* insert, dropping the last */
    for (; i > 0 && cheaper(hi, lo, s, &p->cand[i - 1]); i--)
      p->cand[i] = p->cand[i - 1];
    p->cand[i] = (candidate){hi, lo, s};
  }
  p->ncand = n;
  p->icand = 1;
  p->cand_stamp = n > 0 ? p->stamp : 0; /* cand[0] is best when n > 0 */
  return best.slot;
}

/* take_slot: a slot for a new vector, evicting when all are used */
static int take_slot(plf_planner *p, plf_plan_counts *c) {
  if (p->used < p->cap) {
    int s = p->used++;
    if (p->used > p->high) p->high = p->used;
    return s;
  }
  if (p->max == PLF_PLAN_UNBOUNDED) return -1; /* reserved before */
  int s = victim(p);
  if (s < 0) return -1;
  ix_remove(p->table, p->tmask, p->skey, s);
  history_add(p, p->skey[s]);
  c->evictions++;
  return s;
}

static void emit_matrix(plf_planner *p, const plf_tree *t, plf_plan *plan,
                        int node, plf_plan_counts *c) {
  if (p->mstamp[node] == p->stamp) return;
  p->mstamp[node] = p->stamp;
  plan->matrices[plan->matrix_count++] =
      (plf_matrix_update){node, t->length[node]};
  c->matrices++;
}

static int scale_of(const plf_planner *p, int buffer) {
  if ((p->flags & PLF_PLAN_NO_SCALING) || buffer < p->tips) return PLF_NONE;
  return buffer - p->tips;
}

/* compute: the op for v from its children's buffers; returns its slot */
static int compute(plf_planner *p, const plf_tree *t, plf_plan *plan,
                   const frame *f, plf_plan_counts *c) {
  int v = f->node;
  int s = take_slot(p, c);
  if (s < 0) return EMBER_EINTERNAL;
  int first = p->ncanon[v];
  int c1 = t->child[2 * v + first], c2 = t->child[2 * v + 1 - first];
  int b1 = f->buf[first], b2 = f->buf[1 - first];
  int scaled = !(p->flags & PLF_PLAN_NO_SCALING);
  plan->ops[plan->op_count++] = (plf_op){
      .dest = p->tips + s,
      .dest_scale_write = scaled ? s : PLF_NONE,
      .dest_scale_read = PLF_NONE,
      .child1 = b1,
      .child1_matrix = c1,
      .child2 = b2,
      .child2_matrix = c2,
      .child1_scale = scale_of(p, b1),
      .child2_scale = scale_of(p, b2)};
  c->ops++;
  emit_matrix(p, t, plan, c1, c);
  emit_matrix(p, t, plan, c2, c);
  if (b1 >= p->tips) unpin(p, b1 - p->tips);
  if (b2 >= p->tips) unpin(p, b2 - p->tips);
  p->skey[s] = p->nkey[v];
  p->stips[s] = p->ntips[v];
  p->slast[s] = p->stamp;
  p->smemb[s] = 1;
  p->snext[s] = -1;
  p->sneed[s] = 0;
  ix_insert(p->table, p->tmask, p->skey, s);
  pin(p, s);
  if (history_take(p, p->nkey[v])) c->recomputed++;
  return s;
}

/* walk: the largest-subtree-first traversal; *root_buf gets the root's */
static int walk(plf_planner *p, const plf_tree *t, plf_plan *plan,
                int *root_buf, plf_plan_counts *c) {
  int sp = 0, ret = PLF_NONE;
  p->stack[sp++] = (frame){.node = t->root, .stage = 0, .early = -1};
  while (sp > 0) {
    frame *f = &p->stack[sp - 1];
    int v = f->node;
    if (f->stage == 0) {
      if (v < t->tips) {
        ret = v;
        sp--;
        continue;
      }
      int s = ix_find(p->table, p->tmask, p->skey, p->nkey[v]);
      if (s >= 0) {
        c->hits++;
        touch(p, s);
        pin(p, s);
        ret = p->tips + s;
        sp--;
        continue;
      }
      int a = t->child[2 * v + p->nfirst[v]];
      int b = t->child[2 * v + 1 - p->nfirst[v]];
      f->early = -1;
      if (b >= t->tips) {
        int sb = ix_find(p->table, p->tmask, p->skey, p->nkey[b]);
        if (sb >= 0 && ix_find(p->table, p->tmask, p->skey, p->nkey[a]) < 0 &&
            (p->max == PLF_PLAN_UNBOUNDED ||
             p->pinned + 1 + p->nneed[a] <= p->max)) {
          c->hits++;
          touch(p, sb);
          pin(p, sb);
          f->early = sb;
        }
      }
      f->stage = 1;
      p->stack[sp++] = (frame){.node = a, .stage = 0, .early = -1};
    } else if (f->stage == 1) {
      f->buf[p->nfirst[v]] = ret;
      f->stage = 2;
      if (f->early < 0) {
        int b = t->child[2 * v + 1 - p->nfirst[v]];
        p->stack[sp++] = (frame){.node = b, .stage = 0, .early = -1};
      } else {
        ret = p->tips + f->early;
      }
    } else {
      f->buf[1 - p->nfirst[v]] = ret;
      int s = compute(p, t, plan, f, c);
      if (s < 0) return s;
      ret = p->tips + s;
      sp--;
    }
  }
  *root_buf = ret;
  return 0;
}

static int plan_tree(plf_planner *p, const plf_tree *t, plf_plan *plan) {
  int rc = plan_reserve(plan, p->tips);
  if (rc) return rc;
  if (p->max == PLF_PLAN_UNBOUNDED && p->used + p->tips - 1 > p->cap &&
      (rc = grow_slots(p, 2 * p->cap > p->used + p->tips - 1
                              ? 2 * p->cap
                              : p->used + p->tips - 1)) != 0)
    return rc;
  describe(p, t);
  if (p->max != PLF_PLAN_UNBOUNDED && p->nneed[t->root] > p->max)
    return EMBER_EINTERNAL; /* the minimum budget rules this out */
  p->stamp++;
  mark(p, t);
  plf_plan_tree *seg = &plan->trees[plan->tree_count];
  memset(seg, 0, sizeof *seg);
  seg->first_op = plan->op_count;
  seg->first_matrix = plan->matrix_count;
  seg->counts.trees = 1;
  int root = PLF_NONE;
  if ((rc = walk(p, t, plan, &root, &seg->counts)) != 0) return rc;
  unpin(p, root - p->tips);
  seg->op_count = plan->op_count - seg->first_op;
  seg->matrix_count = plan->matrix_count - seg->first_matrix;
  seg->root = root;
  seg->root_scale = scale_of(p, root);
  plan->tree_count++;
  plf_plan_counts *tot = &p->totals;
  tot->trees++;
  tot->ops += seg->counts.ops;
  tot->matrices += seg->counts.matrices;
  tot->hits += seg->counts.hits;
  tot->recomputed += seg->counts.recomputed;
  tot->evictions += seg->counts.evictions;
  return 0;
}

/* ---- lookahead ---------------------------------------------------------- */

/* window_alloc: the lookahead's arrays, once per planner */
static int window_alloc(plf_planner *p) {
  if (p->wkey) return 0;
  size_t limit = 2 * (size_t)(p->tips - 1);
  if (limit < (1u << 16)) limit = 1u << 16;
  size_t cap = limit + (size_t)p->cap, cells = pow2_at_least(2 * cap);
  p->wkey = malloc(cap * sizeof *p->wkey);
  p->wcells = malloc(cells * sizeof *p->wcells);
  p->reads = malloc(limit * sizeof *p->reads);
  if (!p->wkey || !p->wcells || !p->reads) {
    free(p->wkey);
    free(p->wcells);
    free(p->reads);
    p->wkey = NULL;
    p->wcells = NULL;
    p->reads = NULL;
    return EMBER_ENOMEM;
  }
  p->wcap = cap;
  p->wmask = cells - 1;
  return 0;
}

static int cmp_foreseen(const void *x, const void *y) {
  const foreseen *a = x, *b = y;
  if (a->key.a != b->key.a) return a->key.a < b->key.a ? -1 : 1;
  if (a->key.b != b->key.b) return a->key.b < b->key.b ? -1 : 1;
  return (a->tree > b->tree) - (a->tree < b->tree);
}

static int window_has(const plf_planner *p, key128 k) {
  return ix_find(p->wcells, p->wmask, p->wkey, k) >= 0;
}

static void window_add(plf_planner *p, key128 k) {
  p->wkey[p->wcount] = k;
  ix_insert(p->wcells, p->wmask, p->wkey, (int)p->wcount++);
}

/* foresee: plans trees[0..count) as an unbounded planner would (a set of
 * keys, no slots), as far as the window's arrays allow (at least one
 * tree), and records which tree reads which resident vector; returns the
 * window's length */
static int foresee(plf_planner *p, const plf_tree *const *trees, int count) {
  memset(p->wcells, 0xff, (p->wmask + 1) * sizeof *p->wcells);
  p->wcount = 0;
  p->nreads = 0;
  for (int s = 0; s < p->used; s++) window_add(p, p->skey[s]);
  size_t limit = p->wcap - (size_t)p->cap, per_tree = (size_t)p->tips - 1;
  int j = 0;
  for (; j < count; j++) {
    if (j > 0 && (p->wcount + per_tree > p->wcap ||
                  p->nreads + per_tree > limit))
      break;
    const plf_tree *t = trees[j];
    describe(p, t);
    int sp = 0;
    p->order[sp++] = t->root;
    while (sp > 0) { /* down from the root over what it needs */
      int v = p->order[--sp];
      if (v < t->tips) continue;
      if (window_has(p, p->nkey[v])) {
        p->reads[p->nreads++] = (foreseen){p->nkey[v], j};
      } else {
        window_add(p, p->nkey[v]); /* computed */
        p->order[sp++] = t->child[2 * v];
        p->order[sp++] = t->child[2 * v + 1];
      }
    }
  }
  qsort(p->reads, p->nreads, sizeof *p->reads, cmp_foreseen);
  for (int s = 0; s < p->cap; s++) p->snext[s] = -1;
  return j;
}

int plf_planner_add_trees(plf_planner *p, const plf_tree *const *trees,
                          size_t count, plf_plan *plan) {
  if (!p || !plan || (!trees && count) || count > INT_MAX)
    return EMBER_EPARAM;
  size_t ops = plan->op_count, mats = plan->matrix_count,
         segs = plan->tree_count;
  plf_plan_counts totals = p->totals;
  for (size_t i = 0; i < count; i++)
    if (!trees[i] || trees[i]->tips != p->tips || trees[i]->root == PLF_NONE)
      return EMBER_EPARAM;
  int rc = 0, lookahead = p->max != PLF_PLAN_UNBOUNDED && count > 1;
  if (lookahead && (rc = window_alloc(p)) != 0) return rc;
  for (size_t i = 0; i < count && rc == 0;) {
    int len = 1;
    if (lookahead) len = foresee(p, trees + i, (int)(count - i));
    p->window = lookahead ? len : 0;
    for (int j = 0; j < len && rc == 0; j++) {
      p->cur = j;
      rc = plan_tree(p, trees[i + (size_t)j], plan);
    }
    p->window = 0;
    i += (size_t)len;
  }
  if (rc) {
    plan->op_count = ops;
    plan->matrix_count = mats;
    plan->tree_count = segs;
    p->totals = totals;
    plf_planner_reset(p);
  }
  return rc;
}

int plf_planner_add_tree(plf_planner *p, const plf_tree *t, plf_plan *plan) {
  return plf_planner_add_trees(p, &t, 1, plan);
}
