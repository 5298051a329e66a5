/*
 * cnn_cpu_internal.h - the inside of a oneDNN stage, shared by the file
 * that builds it (cnn_cpu_build.c: memories, primitives and the lists of
 * steps) and the one that runs it (cnn_cpu.c).
 *
 * A stage of L layers has L+1 tensors: t[0] its input (plain NCHW: a copy
 * of the caller's where layer 0 keeps it for PG, else the caller's buffer
 * during the forward), t[j+1] layer j's output in the layout its primitive
 * chose, each with an error tensor of the same layout. A layer whose
 * primitive wants its input in another layout keeps its own copy (the
 * activation kept for PG) and a reorder; otherwise it shares t[j]. Forward
 * and backward are lists of steps built once: a oneDNN primitive with its
 * arguments, or a C function.
 */
#ifndef CNN_CPU_INTERNAL_H
#define CNN_CPU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <oneapi/dnnl/dnnl.h>

#include "cnn_cpu.h"
#include "cnn_pass.h"

#define CPU_STEP_MAX_ARGS 9
#define CPU_IMPL_LEN 192

struct cnn_cpu_stage;
struct cpu_layer;

typedef struct cpu_step {
  dnnl_primitive_t prim;  /* or NULL, and fn */
  void (*fn)(struct cnn_cpu_stage *s, struct cpu_layer *l);
  struct cpu_layer *layer;
  bool accumulates;       /* adds to the accumulated gradients: skipped
                             while they are zero (PG wrote them itself) */
  unsigned modes;         /* forward steps: the passes (1 << cnn_mode)
                             that run it */
  int nargs;
  dnnl_exec_arg_t args[CPU_STEP_MAX_ARGS];
} cpu_step;

/* A buffer of the stage's: from mmap from CPU_MMAP_MIN bytes on, so that
 * a stage destroyed (the pool evicts it, its app leaves) gives its memory
 * back to the system at once, where malloc's arenas would keep freed
 * medium buffers resident; from malloc below. */
#define CPU_MMAP_MIN (256u << 10)

typedef struct cpu_buf {
  void *p;
  size_t size;
} cpu_buf;

typedef struct cpu_tensor {
  dnnl_memory_desc_t md;
  dnnl_memory_t mem, diff;
} cpu_tensor;

typedef struct cpu_layer {
  cnn_layer l;
  size_t index;              /* in the network */
  size_t bwd_first, bwd_count; /* its steps in the stage's backward list */
  size_t pg_step;            /* its PG step in that list (conv, connected) */
  size_t bn_step;            /* batch_norm: its normalisation's backward
                                step in that list, whose diff scale and
                                shift are chosen per backward */
  /* parameters (conv, connected): in the forward primitive's layouts */
  dnnl_memory_desc_t w_canon_md; /* OIHW or OI, plain */
  dnnl_memory_t w, b, vw, vb;
  dnnl_memory_t gw, gb;      /* accumulated, bwd_weights' layouts */
  dnnl_memory_t gw_new, gb_new; /* this backward's, when the accumulated
                                   ones are not zero (else PG writes those) */
  dnnl_memory_t w_bd;        /* weights in bwd_data's layout (or w) */
  dnnl_primitive_t w_to_bd;  /* w -> w_bd, NULL when shared */
  dnnl_memory_t gw_fwd;      /* gw in w's layout (or gw) */
  dnnl_primitive_t gw_to_fwd;
  /* batch_norm: b is the normalisation's shift; its scale, their
   * momentum and gradients (plain vectors of out.c); the batch's mean and
   * variance, the rolling ones; z the convolution's output (the
   * normalisation's input) and its error */
  dnnl_memory_t scale, vs, gs, gs_new;
  dnnl_memory_t mean, var, rmean, rvar;
  dnnl_memory_t z, z_diff;
  /* dropout: the mask (0 or 1/(1-p), 1 in evaluation), plain */
  dnnl_memory_t mask;
  char impl[CPU_IMPL_LEN];
} cpu_layer;

struct cnn_cpu_stage {
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  /* every primitive is created with attr, whose scratchpad mode is the
   * user's: the stage's own scratch (the largest any of its primitives
   * asks for; they run one at a time) goes with every execution. oneDNN's
   * default scratchpad is per thread, the creating thread's: a stage built
   * on one worker thread and run on another (the pool hands stages to
   * any) would run a gemm convolution in another thread's scratchpad,
   * smaller or none */
  dnnl_primitive_attr_t attr;
  dnnl_memory_t scratch;
  size_t scratch_size;       /* bytes the largest primitive asks for */
  size_t bytes;              /* of the stage's buffers, scratch included */
  uint32_t batch;
  size_t first, count;       /* layers first .. first+count-1 of the net */
  bool eb_in;                /* error at the stage's input computed */
  bool softmax;              /* the stage ends in the softmax */
  uint32_t classes;
  cpu_layer *layers;
  cpu_tensor *t;             /* count + 1 */
  dnnl_memory_t out_plain;   /* the output, NCHW (or t[count].mem) */
  dnnl_memory_t dout_plain;  /* the error at the output, NCHW */
  dnnl_memory_t xent_plain;  /* softmax stages: the loss's gradient */
  dnnl_primitive_t out_reo;  /* t[count].mem -> out_plain, or NULL */
  dnnl_primitive_t dout_reo; /* dout_plain -> t[count].diff, or NULL */
  cpu_step *fwd, *bwd;
  size_t nfwd, nbwd, cap_fwd, cap_bwd;
  dnnl_primitive_t *prims;   /* every primitive, for destroy */
  dnnl_memory_t *mems;       /* every memory, for destroy */
  cpu_buf *bufs;             /* each one's buffer, ours: a memory that
                                owned its buffer would free it when the
                                caller's buffer is swapped in (swap_handle) */
  size_t nprims, nmems, cap_prims, cap_mems, cap_bufs;
  uint8_t *labels;           /* the last forward's, softmax stages */
  bool have_labels;
  bool grads_zero;           /* no backward since the last update */
  bool keep_input;           /* t[0] is kept for PG: the caller's input is
                                copied in; otherwise t[0].mem reads the
                                caller's buffer during the forward */
  cnn_pass pass;             /* the running forward pass's */
};

/* Size in bytes and data of a memory. */
size_t cpu_mem_size(const_dnnl_memory_t m);
float *cpu_mem_data(const_dnnl_memory_t m);

/* Run a list of steps; 0 or EMBER_EPLATFORM. */
int cpu_run_steps(struct cnn_cpu_stage *s, cpu_step *steps, size_t n);

/* A step run as a C function: the loss's gradient into xent_plain. */
void cpu_xent_grad(struct cnn_cpu_stage *s, cpu_layer *l);

/* A step run as a C function: the dropout layer's mask for the running
 * pass (cnn_pass.h's hash; all 1 in evaluation). */
void cpu_dropout_mask(struct cnn_cpu_stage *s, cpu_layer *l);

#endif
