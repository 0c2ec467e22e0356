/* shape_plugin.h — declarations shared by the files of the shape plugin: the four view ops
 * (transpose, dimshuffle, reshape, broadcast_to), each a make_node, infer_shape and make_view,
 * and the checks they share. Hidden visibility: the plugin exports only dlop_plugin_init. */
#ifndef DLOP_SHAPE_PLUGIN_H
#define DLOP_SHAPE_PLUGIN_H

#include <dlop/kit/kernel_util.h>
#include <dlop/plugin.h>

#define SHAPE_DTYPES DLOP_DTYPES_ALL

/* One input of any dtype and rank, one output: DLOP_TYPE_ERROR naming the op otherwise. */
int shape_check_input(const dlop_node_args *args);
/* make_view's usual start: the output's byte offset is the input's (views that only permute,
 * add or drop axes start at the input's element 0). */
void shape_view_same_start(const dlop_view_args *args);

/* Each op's make_node fills dtype, ndim and shape (unknown dims propagated); infer_shape
 * fills the shape again from the inputs' shapes (static or concrete); make_view gives strides
 * and offset over the input. Static rules are shared: make_node calls the op's shape rule. */
int transpose_make_node(const dlop_node_args *args);
int transpose_infer_shape(const dlop_node_args *args);
int transpose_make_view(const dlop_view_args *args);

int dimshuffle_make_node(const dlop_node_args *args);
int dimshuffle_infer_shape(const dlop_node_args *args);
int dimshuffle_make_view(const dlop_view_args *args);

int reshape_make_node(const dlop_node_args *args);
int reshape_infer_shape(const dlop_node_args *args);
int reshape_make_view(const dlop_view_args *args);

int broadcast_to_make_node(const dlop_node_args *args);
int broadcast_to_infer_shape(const dlop_node_args *args);
int broadcast_to_make_view(const dlop_view_args *args);

#endif
