/* fusion_group.c — what one fused group is made of: each member's scalar body (asked of its op
 * through stage.h, checked, copied), the values its members produce, the tensors it reads (and
 * the one-element constants it writes into its code instead), and the values the rest of the
 * function reads, which become the fused node's outputs. Every other member output stays in
 * the kernel's registers: its buffer disappears from the function. */
#include <stdlib.h>
#include <string.h>

#include "fusion.h"
#include "source_elementwise.h"

void dlop__fusion_member_free(dlop__fusion_member *member) {
  if (member == NULL) return;
  free(member->code);
  free(member->input_compute);
  free(member->output_compute);
  free(member->sources);
  free(member->values);
  memset(member, 0, sizeof *member);
}

/* The conversions the host emits around a body: none, or float16/bfloat16 storage to and from
 * float32. */
int dlop__fusion_conversion_allowed(int32_t storage, int32_t compute) {
  if (compute == storage) return 1;
  return compute == DLOP_FLOAT32 && (storage == DLOP_FLOAT16 || storage == DLOP_BFLOAT16);
}

/* "node #3 exp" in messages; "exp" for a node of no function (index -1: fusion_alone.c's). */
static const char *node_name(const dlop__function_node *node, char *buffer, size_t size) {
  if (node->index < 0) dlop__format(buffer, size, "%s", node->op->name);
  else dlop__format(buffer, size, "node #%d %s", (int)node->index, node->op->name);
  return buffer;
}

static int check_compute(const dlop__function_node *node, const char *what, int32_t index,
                         int32_t storage, int32_t compute) {
  char name[128];
  if (dlop__fusion_conversion_allowed(storage, compute)) return DLOP_OK;
  return dlop__error(DLOP_PLUGIN_ERROR,
                     "%s: scalar_body gave %s %d (%s) the compute dtype %d (%s): the host "
                     "converts only float16 and bfloat16 to and from float32, so a compute dtype "
                     "is the storage dtype or that float32 (docs/abi.md, \"Scalar bodies\")",
                     node_name(node, name, sizeof name), what, (int)index,
                     dlop_dtype_name((dlop_dtype)storage), (int)compute,
                     compute >= 0 && compute < DLOP_DTYPE_COUNT
                         ? dlop_dtype_name((dlop_dtype)compute)
                         : "not a dtype");
}

/* The body's results, checked: code given and terminated, a prelude named, compute dtypes the
 * host can convert. */
static int check_body(const dlop__function_node *node, const dlop_scalar_body_args *body,
                      const char *buffer, dlop__fusion_member *member) {
  char op[128];
  int status = DLOP_OK;
  node_name(node, op, sizeof op);
  if (body->code == NULL || body->code[0] == '\0')
    return dlop__error(DLOP_PLUGIN_ERROR, "%s: scalar_body succeeded but gave no code", op);
  if (body->code >= buffer && body->code < buffer + DLOP__FUSION_CODE_SIZE &&
      memchr(body->code, '\0', (size_t)(buffer + DLOP__FUSION_CODE_SIZE - body->code)) == NULL)
    return dlop__error(DLOP_PLUGIN_ERROR,
                       "%s: scalar_body wrote code that is not NUL-terminated within the %d-byte "
                       "code buffer",
                       op, DLOP__FUSION_CODE_SIZE);
  if (body->prelude != NULL && (body->prelude_name == NULL || body->prelude_name[0] == '\0'))
    return dlop__error(DLOP_PLUGIN_ERROR,
                       "%s: scalar_body gave a prelude but no prelude_name (the host emits one "
                       "prelude per name)",
                       op);
  for (int32_t i = 0; i < node->num_inputs && status == DLOP_OK; i++)
    status = check_compute(node, "input", i, node->input_types[i].dtype, member->input_compute[i]);
  for (int32_t o = 0; o < node->num_outputs && status == DLOP_OK; o++)
    status = check_compute(node, "output", o, node->output_types[o].dtype,
                           member->output_compute[o]);
  return status;
}

int dlop__fusion_query_body(const dlop__function_node *node, dlop__fusion_member *member) {
  dlop_scalar_body_args body;
  char *buffer = malloc(DLOP__FUSION_CODE_SIZE);
  memset(member, 0, sizeof *member);
  member->input_compute = malloc(sizeof(int32_t) * ((size_t)node->num_inputs + 1));
  member->output_compute = malloc(sizeof(int32_t) * ((size_t)node->num_outputs + 1));
  member->sources = calloc((size_t)node->num_inputs + 1, sizeof(dlop__fusion_source));
  member->values = calloc((size_t)node->num_outputs + 1, sizeof(int32_t));
  if (buffer == NULL || !member->input_compute || !member->output_compute || !member->sources ||
      !member->values) {
    free(buffer);
    dlop__fusion_member_free(member);
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory asking for scalar bodies");
  }
  dlop__stage_node stage = dlop__function_stage_node(node, node->index);
  int status = dlop__stage_scalar_body(&stage, node->input_types, node->output_types, buffer,
                                       DLOP__FUSION_CODE_SIZE, member->input_compute,
                                       member->output_compute, &body);
  if (status == DLOP_OK) status = check_body(node, &body, buffer, member);
  if (status == DLOP_OK) {
    member->code = strdup(body.code);
    member->prelude = body.prelude;
    member->prelude_name = body.prelude ? body.prelude_name : NULL;
    member->body_flags = body.flags & DLOP_SCALAR_BODY_EXACT; /* bits of later minors: unknown */
    /* the host's own ops from source only: a plugin's bit 30 means nothing yet */
    member->runtime_params = (body.flags & DLOP__SCALAR_BODY_RUNTIME_PARAMS) &&
                             dlop__source_elementwise_is(node->op);
    member->param_base = -1;
    if (member->code == NULL) status = dlop__error(DLOP_OUT_OF_MEMORY, "out of memory");
  }
  free(buffer);
  if (status != DLOP_OK) dlop__fusion_member_free(member);
  return status;
}

void dlop__fusion_group_free(dlop__fusion_group *group) {
  if (group == NULL) return;
  for (int32_t m = 0; m < group->num_members; m++) {
    dlop__function_node *node = &group->members[m].node;
    free(node->params);
    free(node->input_slots);
    free(node->output_slots);
    free(node->input_types);
    free(node->output_types);
    dlop__fusion_member_free(&group->members[m]);
  }
  free(group->members);
  free(group->value_slots);
  free(group->input_slots);
  free(group->input_types);
  free(group->input_scalar);
  free(group->literals);
  free(group->output_slots);
  free(group->output_types);
  free(group->output_values);
  dlop__fusion_reduction_free(group->reduction);
  dlop__fusion_row_free(group->row);
  free(group);
}

/* A static shape of exactly one element (every dim known and 1): read once per run. */
static int one_element(const dlop_type *type) {
  for (int32_t d = 0; d < type->ndim; d++)
    if (type->shape[d] != 1) return 0;
  return 1;
}

/* Two static types whose shapes are known to be equal. */
static int same_static_shape(const dlop_type *a, const dlop_type *b) {
  if (a->ndim != b->ndim) return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] == DLOP_DIM_UNKNOWN || a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* The literal for a one-element constant slot, read from the array now. */
static int add_literal(const dlop_function *function, dlop__fusion_group *group, int32_t slot,
                       int32_t *index) {
  for (int32_t l = 0; l < group->num_literals; l++)
    if (group->literals[l].slot == slot) {
      *index = l;
      return DLOP_OK;
    }
  dlop__fusion_literal *literal = &group->literals[group->num_literals];
  const dlop_array *array = function->constants[slot - function->num_inputs];
  literal->slot = slot;
  literal->dtype = function->slot_types[slot].dtype;
  literal->type = function->slot_types[slot];
  literal->bits = 0;
  int status = dlop_array_to_host(array, &literal->bits,
                                  dlop_dtype_size((dlop_dtype)literal->dtype));
  if (status != DLOP_OK) {
    char reason[1024];
    dlop__format(reason, sizeof reason, "%s", dlop_last_error());
    return dlop__error(status, "fusion: reading constant '%s' for its kernel failed: %s",
                       function->slot_names[slot], reason);
  }
  *index = group->num_literals++;
  return DLOP_OK;
}

int dlop__fusion_group_add_literal(const dlop_function *function, dlop__fusion_group *group,
                                   int32_t slot, int32_t *index) {
  return add_literal(function, group, slot, index);
}

static int32_t add_input(const dlop_function *function, dlop__fusion_group *group, int32_t slot) {
  for (int32_t k = 0; k < group->num_inputs; k++)
    if (group->input_slots[k] == slot) return k;
  int32_t k = group->num_inputs++;
  group->input_slots[k] = slot;
  group->input_types[k] = function->slot_types[slot];
  group->input_scalar[k] = (char)one_element(&function->slot_types[slot]);
  return k;
}

int32_t dlop__fusion_group_add_input(const dlop_function *function, dlop__fusion_group *group,
                                     int32_t slot) {
  return add_input(function, group, slot);
}

/* Whether value slot is read by a node outside the group or after the run. */
static int read_outside(const dlop_function *function, const int32_t *group_of, int32_t number,
                        int32_t slot) {
  for (int32_t o = 0; o < function->num_outputs; o++)
    if (function->output_slots[o] == slot) return 1;
  for (int32_t n = 0; n < function->num_nodes; n++) {
    if (group_of[n] == number) continue;
    for (int32_t j = 0; j < function->nodes[n].num_inputs; j++)
      if (function->nodes[n].input_slots[j] == slot) return 1;
  }
  return 0;
}

/* Whether anything in the group reads value slot. */
static int read_inside(const dlop__fusion_group *group, int32_t slot) {
  for (int32_t m = 0; m < group->num_members; m++)
    for (int32_t j = 0; j < group->members[m].node.num_inputs; j++)
      if (group->members[m].node.input_slots[j] == slot) return 1;
  return 0;
}

int dlop__fusion_connect_sources(const dlop_function *function, dlop__fusion_group *group,
                                 int32_t *value_of_slot) {
  int32_t m, j, status = DLOP_OK;
  for (m = 0; m < group->num_members && status == DLOP_OK; m++) {
    dlop__fusion_member *member = &group->members[m];
    for (j = 0; j < member->node.num_inputs && status == DLOP_OK; j++) {
      int32_t slot = member->node.input_slots[j], index;
      if (value_of_slot[slot] >= 0) {
        member->sources[j].kind = DLOP__FUSION_FROM_VALUE;
        member->sources[j].index = value_of_slot[slot];
      } else if (slot >= function->num_inputs && slot < function->first_node_slot &&
                 one_element(&function->slot_types[slot])) {
        status = add_literal(function, group, slot, &index);
        member->sources[j].kind = DLOP__FUSION_FROM_LITERAL;
        member->sources[j].index = index;
      } else {
        member->sources[j].kind = DLOP__FUSION_FROM_INPUT;
        member->sources[j].index = add_input(function, group, slot);
      }
    }
    /* its outputs become values only now: a member reads values of earlier members only */
    for (j = 0; j < member->node.num_outputs; j++) {
      int32_t v = group->num_values++;
      group->value_slots[v] = member->node.output_slots[j];
      value_of_slot[member->node.output_slots[j]] = v;
      member->values[j] = v;
    }
  }
  return status;
}

static int connect(const dlop_function *function, const int32_t *group_of, int32_t number,
                   dlop__fusion_group *group, int32_t *value_of_slot) {
  int status = dlop__fusion_connect_sources(function, group, value_of_slot);
  if (status != DLOP_OK) return status;
  for (int32_t v = 0; v < group->num_values; v++) {
    int32_t slot = group->value_slots[v];
    /* read later, or by nobody (an unused output of a multi-output op still gets its buffer,
     * which dies at once: every output of the group then has the iteration's shape) */
    if (!read_outside(function, group_of, number, slot) && read_inside(group, slot)) continue;
    int32_t o = group->num_outputs++;
    group->output_slots[o] = slot;
    group->output_types[o] = function->slot_types[slot];
    group->output_values[o] = v;
  }
  if (group->num_inputs + group->num_outputs > DLOP__FUSION_MAX_OPERANDS)
    return dlop__error(DLOP_INTERNAL, "fusion: group %d has %d operands, more than the %d planned",
                       (int)number, (int)(group->num_inputs + group->num_outputs),
                       DLOP__FUSION_MAX_OPERANDS);
  for (int32_t o = 1; o < group->num_outputs; o++)
    if (!same_static_shape(&group->output_types[0], &group->output_types[o])) group->per_output = 1;
  return DLOP_OK;
}

/* The members' run-time parameters become the group's kernel arguments, in member order, while
 * they fit; a member that does not fit gets its values written into its code. */
static void assign_params(dlop__fusion_group *group) {
  for (int32_t m = 0; m < group->num_members; m++) {
    dlop__fusion_member *member = &group->members[m];
    const dlop__function_node *node = &member->node;
    int scalars = 1;
    for (int32_t k = 0; k < node->num_params; k++)
      scalars &= node->params[k].kind == DLOP_PARAM_FLOAT || node->params[k].kind == DLOP_PARAM_INT;
    if (!member->runtime_params || node->num_params == 0 || !scalars ||
        group->num_params + node->num_params > DLOP__FUSION_MAX_PARAMS)
      continue;
    member->param_base = group->num_params;
    for (int32_t k = 0; k < node->num_params; k++) {
      int32_t q = group->num_params++;
      group->param_kinds[q] = node->params[k].kind;
      if (node->params[k].kind == DLOP_PARAM_FLOAT)
        memcpy(&group->param_bits[q], &node->params[k].u.f, sizeof(uint64_t));
      else
        group->param_bits[q] = (uint64_t)node->params[k].u.i;
    }
  }
}

dlop__fusion_group *dlop__fusion_group_alloc(int32_t members, int32_t reads, int32_t writes) {
  dlop__fusion_group *group = calloc(1, sizeof *group);
  if (group == NULL) return NULL;
  group->members = calloc((size_t)members + 1, sizeof(dlop__fusion_member));
  group->value_slots = malloc(sizeof(int32_t) * ((size_t)writes + 1));
  group->input_slots = malloc(sizeof(int32_t) * ((size_t)reads + 1));
  group->input_types = malloc(sizeof(dlop_type) * ((size_t)reads + 1));
  group->input_scalar = calloc((size_t)reads + 1, 1);
  group->literals = calloc((size_t)reads + 1, sizeof(dlop__fusion_literal));
  group->output_slots = malloc(sizeof(int32_t) * ((size_t)writes + 1));
  group->output_types = malloc(sizeof(dlop_type) * ((size_t)writes + 1));
  group->output_values = malloc(sizeof(int32_t) * ((size_t)writes + 1));
  if (!group->members || !group->value_slots || !group->input_slots || !group->input_types ||
      !group->input_scalar || !group->literals || !group->output_slots || !group->output_types ||
      !group->output_values) {
    dlop__fusion_group_free(group);
    return NULL;
  }
  return group;
}

int dlop__fusion_group_build(const dlop_function *function, const int32_t *group_of,
                             int32_t number, dlop__fusion_member *members_of_node,
                             dlop__fusion_group **result) {
  int32_t n, members = 0, reads = 0, writes = 0;
  *result = NULL;
  for (n = 0; n < function->num_nodes; n++) {
    if (group_of[n] != number) continue;
    members++;
    reads += function->nodes[n].num_inputs;
    writes += function->nodes[n].num_outputs;
  }
  dlop__fusion_group *group = dlop__fusion_group_alloc(members, reads, writes);
  int32_t *value_of_slot = malloc(sizeof(int32_t) * ((size_t)function->num_slots + 1));
  if (group == NULL || value_of_slot == NULL) {
    free(value_of_slot);
    dlop__fusion_group_free(group);
    return dlop__error(DLOP_OUT_OF_MEMORY, "out of memory building a fused group");
  }
  group->number = number;
  /* the members move in: their node structs and bodies are the group's from here on */
  for (n = 0; n < function->num_nodes; n++) {
    if (group_of[n] != number) continue;
    dlop__fusion_member *member = &group->members[group->num_members++];
    *member = members_of_node[n];
    member->node = function->nodes[n];
    memset(&members_of_node[n], 0, sizeof members_of_node[n]);
  }
  for (n = 0; n < function->num_slots; n++) value_of_slot[n] = -1;
  int status = connect(function, group_of, number, group, value_of_slot);
  free(value_of_slot);
  if (status == DLOP_OK) assign_params(group);
  if (status != DLOP_OK) {
    /* the caller still owns the members' node structs (its schedule holds them): give them
     * back untouched by freeing nothing of theirs here */
    for (int32_t m = 0; m < group->num_members; m++) {
      dlop__fusion_member_free(&group->members[m]);
      memset(&group->members[m].node, 0, sizeof group->members[m].node);
    }
    dlop__fusion_group_free(group);
    return status;
  }
  *result = group;
  return DLOP_OK;
}
