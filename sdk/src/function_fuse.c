/* function_fuse.c — the fusion pass of dlop_function_compile: ask each node's op for its scalar
 * body, plan the groups (fusion_plan.c), build them (fusion_group.c), generate one module of
 * kernels for all of them (fusion_source.c) and compile it with the device's run-time compiler
 * (jit.h: the host's C compiler on the CPU, NVRTC on CUDA), then replace each group's members in
 * the schedule by one fused node (fusion_thunk.c) and put the schedule back in a topological
 * order. Whatever cannot be fused runs as it would have: fusion turned off, no compiler, a
 * module that does not compile; the function's note says which and why. */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fusion.h"
#include "jit.h"

/* The C compiler's options: what the plugins' kernels are built with (-O3, no fma contraction:
 * each operation rounds as the unfused nodes' do; no errno, so gcc vectorizes the math
 * functions through libmvec), the host's own vector ISA (the cache keys it by the CPU), and
 * `#pragma omp simd` honoured without OpenMP's runtime. */
static const char *const c_options[] = {"-O3", "-march=native", "-ffp-contract=off",
                                        "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd"};
/* NVRTC's: no fma contraction either (CUDA's library functions use fma explicitly, unaffected),
 * and no warning for the prelude functions a kernel does not call. */
const char *const dlop__fusion_nvrtc_options[] = {"--fmad=false", "--diag-suppress=177"};
const int32_t dlop__fusion_nvrtc_option_count =
    (int32_t)(sizeof dlop__fusion_nvrtc_options / sizeof dlop__fusion_nvrtc_options[0]);

static void note(dlop_function *function, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void note(dlop_function *function, const char *format, ...) {
  char line[1536];
  va_list args;
  va_start(args, format);
  vsnprintf(line, sizeof line, format, args);
  va_end(args);
  free(function->fusion_note);
  function->fusion_note = strdup(line);
}

/* A compiler's message on one line: newlines as "; ", at most size bytes. */
static void one_line(const char *message, char *line, size_t size) {
  size_t used = 0;
  for (const char *p = message; *p && used + 4 < size; p++) {
    if (*p == '\n') {
      if (p[1] == '\0') break;
      line[used++] = ';';
      line[used++] = ' ';
    } else {
      line[used++] = *p;
    }
  }
  line[used] = '\0';
  if (strlen(message) > used && used + 4 >= size && size > 4) memcpy(line + size - 4, "...", 4);
}

void dlop__function_free_fused(dlop__function_node *node) {
  dlop__fusion_group_free(node->fused);
  node->fused = NULL;
}

/* Groups built but not put into the schedule: their members' node structs still belong to the
 * schedule, so only what the groups added is freed. */
static void drop_groups(dlop__fusion_group **groups, int32_t count) {
  for (int32_t g = 0; g < count; g++) {
    if (groups[g] == NULL) continue;
    for (int32_t m = 0; m < groups[g]->num_members; m++)
      memset(&groups[g]->members[m].node, 0, sizeof groups[g]->members[m].node);
    dlop__fusion_group_free(groups[g]);
    groups[g] = NULL;
  }
}

/* CUDA: elements per thread of the vector kernel: one 16-byte pack of the widest operand. */
static int32_t vector_width(const dlop__fusion_group *group) {
  size_t widest = 1;
  for (int32_t k = 0; k < group->num_inputs; k++)
    if (!group->input_scalar[k] && dlop_dtype_size((dlop_dtype)group->input_types[k].dtype) > widest)
      widest = dlop_dtype_size((dlop_dtype)group->input_types[k].dtype);
  /* a reduction's kernel loads packs of its inputs only */
  for (int32_t o = 0; o < group->num_outputs && group->reduction == NULL; o++)
    if (dlop_dtype_size((dlop_dtype)group->output_types[o].dtype) > widest)
      widest = dlop_dtype_size((dlop_dtype)group->output_types[o].dtype);
  return (int32_t)(16 / widest);
}

/* 1 when a member's body calls a function other than a dtype conversion (ew_<to>_of_<from>):
 * its arithmetic, not its memory traffic, may then set the kernel's pace. A rough test: the
 * elemwise plugin's cheap functions (ew_add_*, ew_maximum_*, the comparisons) count as calls
 * too, which costs such a body 0-2 % (the sweep below); it changes no result. */
static int calls_a_function(const dlop__fusion_group *group) {
  static const char *const not_calls[] = {"if", "for", "while", "switch", "sizeof", "return"};
  for (int32_t m = 0; m < group->num_members; m++) {
    const char *code = group->members[m].code;
    for (const char *c = code ? strchr(code, '(') : NULL; c; c = strchr(c + 1, '(')) {
      const char *name = c; /* the identifier before the parenthesis, if any */
      while (name > code && (isalnum((unsigned char)name[-1]) || name[-1] == '_')) name--;
      size_t length = (size_t)(c - name);
      int call = length > 0; /* else a parenthesis or a C cast */
      for (size_t k = 0; call && k < sizeof not_calls / sizeof not_calls[0]; k++)
        call = !(length == strlen(not_calls[k]) && memcmp(name, not_calls[k], length) == 0);
      const char *of = strstr(name, "_of_");
      if (call && !(of != NULL && of < c)) return 1;
    }
  }
  return 0;
}

/* CUDA: packs per thread and step of the vector kernel, from a sweep on an H200 (1, 2 and 4 packs
 * over exp, tanh, sqrt, softplus, x * b + 1 and the seed chain, float16 to float64, 2^26-2^28):
 * more packs in flight pay where a thread's arithmetic is long against its loads: a body that
 * calls functions on one 4-byte input (tanh +4 %, softplus +4-12 % at 2 packs), or 16-bit
 * floats computed in float (sqrt +10 %, softplus +5 % at 4 packs; two inputs +3-7 % at 2). They
 * cost 1-4 % on cheap bodies: one pack there. Bodies of 8-byte dtypes (float64; int64 too) that
 * call functions take the chunk form instead (chunk_block below), 4 packs a thread. */
static int32_t packs_per_thread(const dlop__fusion_group *group) {
  if (group->reduction != NULL || !calls_a_function(group)) return 1;
  int32_t widest = 16 / group->vector_width, arrays = 0;
  for (int32_t k = 0; k < group->num_inputs; k++) arrays += !group->input_scalar[k];
  if (widest >= 8) return 4;
  if (widest <= 2) return arrays <= 1 ? 4 : 2;
  return arrays <= 1 ? 2 : 1;
}

/* CUDA: the vector kernel's chunk form for bodies of 8-byte dtypes that call functions: one
 * chunk of 4 packs a thread, the packs a block of 128 threads apart, one chunk a block and no
 * loop (torch.compile's kernel for the float64 seed chain has this form). Such kernels run at
 * the card's 700 W power limit (the clock down from 1980 to 1000-1770 MHz), where what a thread
 * keeps live costs: timed in steady state on an H200 the seed chain ran at 0.85 of a copy's
 * speed in this form, 0.65 with a grid-stride loop around the same chunk (64 registers against
 * 52), and 0.76 in the grid-stride form of 2 packs a grid apart (bench/RESULTS.md). 0: the
 * grid-stride form, 256 threads. */
static int32_t chunk_block(const dlop__fusion_group *group) {
  int32_t widest = 16 / group->vector_width;
  return group->reduction == NULL && calls_a_function(group) && widest >= 8 ? 128 : 0;
}

void dlop__fusion_group_prepare(dlop__fusion_group *group, dlop_device device) {
  dlop__fusion_group_describe(group);
  group->target =
      device.type == DLOP_DEVICE_CUDA ? DLOP__FUSION_TARGET_CUDA : DLOP__FUSION_TARGET_C;
  group->device = device;
  group->vector_width = vector_width(group);
  group->packs_per_thread = packs_per_thread(group);
  group->chunk_block = chunk_block(group);
}

int dlop__fusion_compile_module(dlop_function *function, dlop__fusion_group *const *groups,
                                int32_t count, const char *source, char *error,
                                size_t error_size) {
  int cuda = function->device.type == DLOP_DEVICE_CUDA;
  const dlop_host_api *host = dlop__host_api();
  char name[96];
  int status;
  if (cuda) {
    status = dlop__cuda_compile_module(function->device.id, source, dlop__fusion_nvrtc_options,
                                       dlop__fusion_nvrtc_option_count, &function->fusion_module,
                                       error, error_size);
  } else {
    dlop__c_module *module = NULL;
    status = dlop__c_compile(source, c_options, (int32_t)(sizeof c_options / sizeof c_options[0]),
                             &module, error, error_size);
    function->fusion_module = module;
  }
  if (status != DLOP_OK) {
    function->fusion_module = NULL;
    return status;
  }
  function->fusion_module_is_cuda = cuda;
  uint32_t max_blocks = 0;
  if (cuda) {
    int32_t sms = 0;
    status = host->cuda_device_attribute(function->device.id, 16 /* multiprocessor count */, &sms);
    if (status != DLOP_OK || sms <= 0) {
      dlop__format(error, error_size, "reading the multiprocessor count of cuda:%d failed",
                   (int)function->device.id);
      return status != DLOP_OK ? status : DLOP_CUDA_ERROR;
    }
    max_blocks = (uint32_t)sms * 128u;
  }
  for (int32_t g = 0; g < count; g++) {
    dlop__fusion_group *group = groups[g];
    static const char *const cuda_kernels[] = {"contiguous", "vector", "strided32", "strided64"};
    /* fusion_reduce_thunk.c's order */
    static const char *const reduce_c[] = {"run", "combine", "identity", "finish"};
    static const char *const reduce_cuda[] = {"reduce_block", "reduce_warp", "reduce_finish"};
    int32_t found = 0, wanted = cuda ? 4 : 1;
    group->module = function->fusion_module;
    group->max_blocks = max_blocks;
    if (group->reduction != NULL) wanted = cuda ? 3 : 4;
    if (group->row != NULL) /* row0, row1, row2, row4, ... (fusion_row_thunk.c's order) */
      for (wanted = 2; cuda && (1 << (wanted - 1)) <= dlop__fusion_row_max_packs(group);) wanted++;
    if (group->row != NULL && !cuda) wanted = 1;
    for (int32_t k = 0; k < wanted + (group->per_output ? group->num_outputs : 0); k++) {
      if (group->row != NULL && cuda)
        snprintf(name, sizeof name, "dlop_fused_g%d_row%d", (int)group->number,
                 k == 0 ? 0 : 1 << (k - 1));
      else if (group->row != NULL)
        snprintf(name, sizeof name, "dlop_fused_g%d_row", (int)group->number);
      else if (group->reduction != NULL)
        snprintf(name, sizeof name, "dlop_fused_g%d_%s", (int)group->number,
                 cuda ? reduce_cuda[k] : reduce_c[k]);
      else if (k < wanted && cuda)
        snprintf(name, sizeof name, "dlop_fused_g%d_%s", (int)group->number, cuda_kernels[k]);
      else if (k < wanted)
        snprintf(name, sizeof name, "dlop_fused_g%d_run", (int)group->number);
      else
        snprintf(name, sizeof name, "dlop_fused_g%d_out%d_%s", (int)group->number,
                 (int)(k - wanted), cuda ? "strided64" : "run");
      void *symbol = NULL;
      if (cuda) {
        status = host->cuda_module_function(function->fusion_module, name, &symbol, error,
                                            error_size);
        if (status != DLOP_OK) return status;
      } else {
        symbol = dlop__c_module_symbol((dlop__c_module *)function->fusion_module, name);
        if (symbol == NULL) {
          dlop__format(error, error_size, "the compiled module has no symbol %s", name);
          return DLOP_INTERNAL;
        }
      }
      group->functions[found++] = symbol;
    }
  }
  return DLOP_OK;
}

void dlop__function_release_fusion(dlop_function *function) {
  if (function->fusion_module == NULL) return;
  if (function->fusion_module_is_cuda)
    dlop__host_api()->cuda_module_unload(function->fusion_module);
  else
    dlop__c_module_release((dlop__c_module *)function->fusion_module);
  function->fusion_module = NULL;
}

int dlop__function_fused_node(dlop__fusion_group *group, dlop__function_node *node) {
  memset(node, 0, sizeof *node);
  node->op = &group->op;
  node->num_inputs = group->num_inputs;
  node->num_outputs = group->num_outputs;
  node->input_slots = malloc(sizeof(int32_t) * ((size_t)group->num_inputs + 1));
  node->input_types = malloc(sizeof(dlop_type) * ((size_t)group->num_inputs + 1));
  node->output_slots = malloc(sizeof(int32_t) * ((size_t)group->num_outputs + 1));
  node->output_types = malloc(sizeof(dlop_type) * ((size_t)group->num_outputs + 1));
  if (!node->input_slots || !node->input_types || !node->output_slots || !node->output_types) {
    free(node->input_slots);
    free(node->input_types);
    free(node->output_slots);
    free(node->output_types);
    memset(node, 0, sizeof *node);
    return DLOP_OUT_OF_MEMORY;
  }
  memcpy(node->input_slots, group->input_slots, sizeof(int32_t) * (size_t)group->num_inputs);
  memcpy(node->input_types, group->input_types, sizeof(dlop_type) * (size_t)group->num_inputs);
  memcpy(node->output_slots, group->output_slots, sizeof(int32_t) * (size_t)group->num_outputs);
  memcpy(node->output_types, group->output_types, sizeof(dlop_type) * (size_t)group->num_outputs);
  dlop__fusion_group_thunk(group, &node->thunk);
  node->has_thunk = 1;
  node->fused = group;
  return DLOP_OK;
}

/* The schedule with each group's members replaced by its fused node, in a topological order
 * that keeps the nodes' order wherever it can (Kahn's algorithm, the earliest ready first). */
static int rewrite_schedule(dlop_function *function, const int32_t *group_of,
                            dlop__fusion_group **groups, int32_t num_groups) {
  int32_t n, g, i, j, items = 0, old_count = function->num_nodes;
  int32_t *item_of_node = malloc(sizeof(int32_t) * ((size_t)old_count + 1));
  int32_t *key = malloc(sizeof(int32_t) * ((size_t)old_count + 1));
  int32_t *node_of_item = malloc(sizeof(int32_t) * ((size_t)old_count + 1)); /* -1 - g for groups */
  int32_t *producer = malloc(sizeof(int32_t) * ((size_t)function->num_slots + 1));
  int32_t *waiting = calloc((size_t)old_count + 1, sizeof(int32_t));
  char *placed = calloc((size_t)old_count + 1, 1);
  dlop__function_node *nodes = calloc((size_t)old_count + 1, sizeof(dlop__function_node));
  int status = DLOP_OK;
  if (!item_of_node || !key || !node_of_item || !producer || !waiting || !placed || !nodes) {
    status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory fusing");
    goto done;
  }
  for (g = 0; g < num_groups; g++)
    if (dlop__function_fused_node(groups[g], &nodes[g]) != DLOP_OK) {
      status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory fusing");
      goto done;
    }
  /* items: groups 0..G-1, then the nodes left alone */
  items = num_groups;
  for (g = 0; g < num_groups; g++) {
    key[g] = old_count;
    node_of_item[g] = -1 - g;
  }
  for (n = 0; n < old_count; n++) {
    if (group_of[n] >= 0) {
      item_of_node[n] = group_of[n];
      if (n < key[group_of[n]]) key[group_of[n]] = n;
    } else {
      item_of_node[n] = items;
      key[items] = n;
      node_of_item[items++] = n;
    }
  }
  for (i = 0; i < function->num_slots; i++) producer[i] = -1;
  for (n = 0; n < old_count; n++)
    for (j = 0; j < function->nodes[n].num_outputs; j++)
      producer[function->nodes[n].output_slots[j]] = item_of_node[n];
  for (n = 0; n < old_count; n++)
    for (j = 0; j < function->nodes[n].num_inputs; j++) {
      int32_t p = producer[function->nodes[n].input_slots[j]];
      if (p >= 0 && p != item_of_node[n]) waiting[item_of_node[n]]++;
    }
  dlop__function_node *schedule = calloc((size_t)items + 1, sizeof(dlop__function_node));
  if (schedule == NULL) {
    status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory fusing");
    goto done;
  }
  for (i = 0; i < items; i++) {
    int32_t best = -1;
    for (j = 0; j < items; j++)
      if (!placed[j] && waiting[j] == 0 && (best < 0 || key[j] < key[best])) best = j;
    if (best < 0) { /* convex groups leave no cycle: this is a bug */
      free(schedule);
      status = dlop__error(DLOP_INTERNAL, "fusion: the fused schedule has a cycle");
      goto done;
    }
    placed[best] = 1;
    schedule[i] = node_of_item[best] >= 0 ? function->nodes[node_of_item[best]]
                                          : nodes[-1 - node_of_item[best]];
    schedule[i].index = i;
    /* the items reading this one's outputs wait for one edge less */
    for (n = 0; n < old_count; n++)
      for (j = 0; j < function->nodes[n].num_inputs; j++)
        if (producer[function->nodes[n].input_slots[j]] == best && item_of_node[n] != best)
          waiting[item_of_node[n]]--;
  }
  /* the members' node structs now belong to their groups; the rest moved into schedule */
  free(function->nodes);
  function->nodes = schedule;
  function->num_nodes = items;
  function->max_node_inputs = function->max_node_outputs = 0;
  for (i = 0; i < items; i++) {
    if (schedule[i].num_inputs > function->max_node_inputs)
      function->max_node_inputs = schedule[i].num_inputs;
    if (schedule[i].num_outputs > function->max_node_outputs)
      function->max_node_outputs = schedule[i].num_outputs;
  }
done:
  if (status != DLOP_OK && nodes != NULL)
    for (g = 0; g < num_groups; g++) {
      free(nodes[g].input_slots);
      free(nodes[g].input_types);
      free(nodes[g].output_slots);
      free(nodes[g].output_types);
    }
  free(item_of_node);
  free(key);
  free(node_of_item);
  free(producer);
  free(waiting);
  free(placed);
  free(nodes);
  return status;
}

int dlop__function_fused_source(const dlop_function *function, dlop__fusion_target target,
                                char **source) {
  dlop__fusion_group **groups = calloc((size_t)function->num_nodes + 1, sizeof *groups);
  int32_t count = 0;
  *source = NULL;
  if (groups == NULL) return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory");
  for (int32_t n = 0; n < function->num_nodes; n++)
    if (function->nodes[n].fused) groups[count++] = function->nodes[n].fused;
  for (int32_t i = 1; i < count; i++) /* in the order compiled: by number */
    for (int32_t j = i; j > 0 && groups[j - 1]->number > groups[j]->number; j--) {
      dlop__fusion_group *swap = groups[j - 1];
      groups[j - 1] = groups[j];
      groups[j] = swap;
    }
  int status = count == 0 ? dlop__error(DLOP_NOT_FOUND, "the function has no fused node")
                          : dlop__fusion_generate(function, groups, count, target, source);
  free(groups);
  return status;
}

/* Which nodes fuse: their op declares a scalar body for their types. */
static int query_bodies(dlop_function *function, char *fusable, dlop__fusion_member *members,
                        int32_t *declared) {
  *declared = 0;
  for (int32_t n = 0; n < function->num_nodes; n++) {
    const dlop__function_node *node = &function->nodes[n];
    if (node->op->scalar_body == NULL || node->op->view_map != NULL) continue;
    (*declared)++;
    int status = dlop__fusion_query_body(node, &members[n]);
    if (status == DLOP_UNSUPPORTED) {
      dlop__clear_error();
      continue;
    }
    if (status != DLOP_OK) return status;
    fusable[n] = 1;
  }
  return DLOP_OK;
}

int dlop__function_fuse(dlop_function *function, int enabled) {
  int32_t count = function->num_nodes, num_groups = 0, declared = 0, g, n;
  int cuda = function->device.type == DLOP_DEVICE_CUDA;
  char why[1024], error[4096], line[1024];
  char *source = NULL;
  int status = DLOP_OK;
  dlop__reduction_pass reductions;
  memset(&reductions, 0, sizeof reductions);
  if (!enabled) {
    note(function, "off (turned off when the function was compiled)");
    return DLOP_OK;
  }
  char *fusable = calloc((size_t)count + 1, 1);
  int32_t *group_of = malloc(sizeof(int32_t) * ((size_t)count + 1));
  dlop__fusion_member *members = calloc((size_t)count + 1, sizeof(dlop__fusion_member));
  /* the module's groups: the reductions' (numbered first), then the elementwise ones */
  dlop__fusion_group **all = calloc((size_t)count + 1, sizeof(dlop__fusion_group *));
  if (!fusable || !group_of || !members || !all) {
    status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory fusing");
    goto done;
  }
  status = query_bodies(function, fusable, members, &declared);
  if (status == DLOP_OK)
    status = dlop__function_fuse_reductions(function, fusable, members, &reductions);
  if (status == DLOP_OK) status = dlop__fusion_plan(function, fusable, group_of, &num_groups);
  if (status != DLOP_OK) goto undo;
  int32_t first = reductions.num_groups, total = first + num_groups;
  if (total == 0) {
    note(function,
         "nothing to fuse (%d of %d nodes declare a scalar body and %d a reduction "
         "body, and none feeds another it could fuse with)",
         (int)declared, (int)count, (int)reductions.declared);
    goto done;
  }
  int available = cuda ? dlop__nvrtc_available(why, sizeof why)
                       : dlop__c_compiler_available(why, sizeof why);
  if (!available) {
    note(function, "unavailable, the function runs unfused: %s", why);
    goto undo;
  }
  dlop__fusion_group **groups = all + first; /* the elementwise ones, by plan number */
  for (g = 0; g < first; g++) all[g] = reductions.groups[g]; /* prepared by the reduction pass */
  for (g = 0; g < num_groups && status == DLOP_OK; g++) {
    status = dlop__fusion_group_build(function, group_of, g, members, &groups[g]);
    if (status == DLOP_OK) {
      groups[g]->number = first + g;
      dlop__fusion_group_prepare(groups[g], function->device);
    }
  }
  if (status == DLOP_OK)
    status = dlop__fusion_generate(
        function, all, total, cuda ? DLOP__FUSION_TARGET_CUDA : DLOP__FUSION_TARGET_C, &source);
  if (status != DLOP_OK) {
    drop_groups(groups, num_groups);
    goto undo;
  }
  uint64_t hash = dlop__fusion_hash(source);
  error[0] = '\0';
  int compiled = dlop__fusion_compile_module(function, all, total, source, error, sizeof error);
  if (compiled != DLOP_OK) {
    /* the nodes run their own kernels: slower, never wrong; say why, here and in explain */
    one_line(error[0] ? error : dlop_last_error(), line, sizeof line);
    note(function, "the generated kernels did not compile, the function runs unfused (%s): %s",
         cuda ? "NVRTC" : "the host's C compiler", line);
    dlop__warn("fusion: %s", function->fusion_note);
    dlop__function_release_fusion(function);
    drop_groups(groups, num_groups);
    dlop__clear_error();
    goto undo;
  }
  for (g = 0; g < total; g++) all[g]->source_hash = hash;
  if (num_groups > 0) status = rewrite_schedule(function, group_of, groups, num_groups);
  if (status != DLOP_OK) {
    drop_groups(groups, num_groups);
    dlop__function_release_fusion(function);
    goto undo;
  }
  dlop__reduction_pass_keep(&reductions);
  /* every node of the graph runs on its own or inside kernels (a stage's node may run in two) */
  int32_t alone = 0;
  for (n = 0; n < function->num_nodes; n++) alone += function->nodes[n].fused == NULL;
  int32_t fused = count - alone;
  function->fused_nodes = fused;
  note(function, "%d node%s in %d generated kernel%s (%s), source %016llx", (int)fused,
       fused == 1 ? "" : "s", (int)total, total == 1 ? "" : "s",
       cuda ? "CUDA, compiled by NVRTC" : "C, compiled by the host's C compiler",
       (unsigned long long)hash);
  goto done;
undo:
  dlop__reduction_pass_undo(function, &reductions);
done:
  dlop__reduction_pass_keep(&reductions); /* nothing left when kept or undone already */
  for (n = 0; members != NULL && n < count; n++) dlop__fusion_member_free(&members[n]);
  free(source);
  free(fusable);
  free(group_of);
  free(members);
  free(all);
  return status;
}
