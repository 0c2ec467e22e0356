/* exp_cpu.c — the CPU kernels of exp (y = e^x) for float16, bfloat16, float32 and float64, made
 * by the kit's DLOP_CPU_UNARY_KERNEL over exp_math.h's polynomials: a contiguous loop gcc
 * vectorizes (built for AVX-512, AVX2 and baseline) and a strided loop for any other layout. */
#include "exp_math.h"
#include "exp_plugin.h"

/* float16 and bfloat16 compute in float32 and round once */
#define EXP_FLOAT16(v) dlop_float_to_half(exp_poly_f32(dlop_half_to_float(v)))
#define EXP_BFLOAT16(v) dlop_float_to_bfloat16(exp_poly_f32(dlop_bfloat16_to_float(v)))

DLOP_CPU_UNARY_KERNEL(exp_float16, uint16_t, uint16_t, EXP_FLOAT16, DLOP_CPU_MULTIVERSION)
DLOP_CPU_UNARY_KERNEL(exp_bfloat16, uint16_t, uint16_t, EXP_BFLOAT16, DLOP_CPU_MULTIVERSION)
DLOP_CPU_UNARY_KERNEL(exp_float32, float, float, exp_poly_f32, DLOP_CPU_MULTIVERSION)
DLOP_CPU_UNARY_KERNEL(exp_float64, double, double, exp_poly_f64, DLOP_CPU_MULTIVERSION)

const dlop_elementwise_cpu_kernel exp_cpu_kernels[DLOP_DTYPE_COUNT] = {
    [DLOP_FLOAT16] = exp_float16,
    [DLOP_BFLOAT16] = exp_bfloat16,
    [DLOP_FLOAT32] = exp_float32,
    [DLOP_FLOAT64] = exp_float64,
};
