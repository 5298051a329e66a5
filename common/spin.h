/*
 * spin.h - a short busy wait before sleeping, bounded and adaptive.
 *
 * A thread that sleeps on a futex and is woken costs both sides a system
 * call and a scheduler round trip: tens of microseconds on a virtual
 * machine, more than a small task's kernel. When the next event usually
 * comes within microseconds (a client that sends its next task as soon as
 * the last one returns), watching a counter for a while is cheaper. The
 * budget adapts per thread, as adaptive mutexes do: it doubles towards
 * what recent waits took when they were short and halves after each
 * fruitless spin, so a thread whose events stopped spins at most a few
 * times, ever shorter, and an idle one costs no CPU.
 */
#ifndef EMBER_SPIN_H
#define EMBER_SPIN_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "clock.h"

#define SPIN_MAX_NS 100000u /* no spin is longer than this */
#define SPIN_MIN_NS 2000u   /* a budget under this is no spin at all */

typedef struct spin_budget {
  uint64_t ns; /* how long the next spin may last; 0: sleep at once */
} spin_budget;

static inline void spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  sched_yield();
#endif
}

/* spin_for_change - watch word until it differs from seen, for at most the
 * budget. 1 when it changed (the budget grows), 0 when it did not (the
 * budget halves: the caller sleeps now). */
static inline int spin_for_change(const _Atomic uint64_t *word, uint64_t seen,
                                  spin_budget *b) {
  if (b->ns < SPIN_MIN_NS) return 0;
  uint64_t start = clock_now_ns(), now = start;
  for (unsigned i = 0; now - start < b->ns; i++) {
    if (atomic_load_explicit(word, memory_order_acquire) != seen) {
      uint64_t took = 2 * (now - start);
      if (took > b->ns) b->ns = took < SPIN_MAX_NS ? took : SPIN_MAX_NS;
      return 1;
    }
    spin_pause();
    /* another thread of ours may need this core (two-core machines) */
    if ((i & 63) == 63) sched_yield();
    now = clock_now_ns();
  }
  b->ns /= 2;
  return 0;
}

/* spin_after_sleep - a sleep that a wake-up ended after slept_ns: had it
 * been short, spinning would have caught it, so spin about that long
 * next time. */
static inline void spin_after_sleep(spin_budget *b, uint64_t slept_ns) {
  if (slept_ns < SPIN_MAX_NS / 2 && 2 * slept_ns > b->ns) b->ns = 2 * slept_ns;
}

#endif
