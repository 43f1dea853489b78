# AOT ID: ['3_backward']
from ctypes import c_void_p, c_long, c_int
import torch
import math
import random
import os
import tempfile
from math import inf, nan
from cmath import nanj
from torch._inductor.hooks import run_intermediate_hooks
from torch._inductor.utils import maybe_profile
from torch._inductor.codegen.memory_planning import _align as align
from torch import device, empty_strided
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.select_algorithm import extern_kernels
import triton
import triton.language as tl
from torch._inductor.runtime.triton_heuristics import start_graph, end_graph
from torch._C import _cuda_getCurrentRawStream as get_raw_stream

aten = torch.ops.aten
inductor_ops = torch.ops.inductor
_quantized = torch.ops._quantized
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
assert_alignment = torch._C._dynamo.guards.assert_alignment
empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu
empty_strided_cpu_pinned = torch._C._dynamo.guards._empty_strided_cpu_pinned
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
empty_strided_xpu = torch._C._dynamo.guards._empty_strided_xpu
empty_strided_mtia = torch._C._dynamo.guards._empty_strided_mtia
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
alloc_from_pool = torch.ops.inductor._alloc_from_pool
async_compile = AsyncCompile()
empty_strided_p2p = torch._C._distributed_c10d._SymmetricMemory.empty_strided_p2p


# kernel path: /tmp/torchinductor_root/rb/crbvqwssoctvmkutrfejgoj2r37fupywtje4gscefj24svgbrixt.py
# Topologically Sorted Source Nodes: [view_20, linear_4, silu, mul_9, linear_5, mul_10, convert_element_type_39, reciprocal, mul_11, mul_12, sub_2, mul_13, add_10, mul_14, convert_element_type_41], Original ATen: [aten.view, aten.silu, aten.mul, aten.silu_backward]
# Source node to ATen node mapping:
#   add_10 => add_10
#   convert_element_type_39 => convert_element_type_39
#   convert_element_type_41 => convert_element_type_41
#   linear_4 => view_13
#   linear_5 => view_15
#   mul_10 => mul_10
#   mul_11 => mul_11
#   mul_12 => mul_12
#   mul_13 => mul_13
#   mul_14 => mul_14
#   mul_9 => mul_9
#   reciprocal => reciprocal
#   silu => add_7, convert_element_type_23, convert_element_type_24, div, exp, neg_2
#   sub_2 => sub_2
#   view_20 => view_20
# Graph fragment:
#   %mm : Tensor "bf16[8192, 4096][4096, 1]cuda:0" = PlaceHolder[target=mm]
#   %addmm_4 : Tensor "bf16[8192, 4096][4096, 1]cuda:0" = PlaceHolder[target=addmm_4]
#   %addmm_5 : Tensor "bf16[8192, 4096][4096, 1]cuda:0" = PlaceHolder[target=addmm_5]
#   %view_20 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.reshape.default](args = (%mm, [4, 2048, 4096]), kwargs = {})
#   %view_13 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%addmm_4, [4, 2048, 4096]), kwargs = {})
#   %convert_element_type_23 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_13, torch.float32), kwargs = {})
#   %neg_2 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%convert_element_type_23,), kwargs = {})
#   %exp : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.exp.default](args = (%neg_2,), kwargs = {})
#   %add_7 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.add.Tensor](args = (%exp, 1), kwargs = {})
#   %div : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%convert_element_type_23, %add_7), kwargs = {})
#   %convert_element_type_24 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%div, torch.bfloat16), kwargs = {})
#   %mul_9 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%view_20, %convert_element_type_24), kwargs = {})
#   %view_15 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%addmm_5, [4, 2048, 4096]), kwargs = {})
#   %mul_10 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%view_20, %view_15), kwargs = {})
#   %convert_element_type_39 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_10, torch.float32), kwargs = {})
#   %reciprocal : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reciprocal.default](args = (%add_7,), kwargs = {})
#   %mul_11 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%reciprocal, 1), kwargs = {})
#   %mul_12 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_39, %mul_11), kwargs = {})
#   %sub_2 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (1, %mul_11), kwargs = {})
#   %mul_13 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_23, %sub_2), kwargs = {})
#   %add_10 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_13, 1), kwargs = {})
#   %mul_14 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_12, %add_10), kwargs = {})
#   %convert_element_type_41 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_14, torch.bfloat16), kwargs = {})
#   return %mul_9,%convert_element_type_41
triton_poi_fused_mul_silu_silu_backward_view_0 = async_compile.triton('triton_poi_fused_mul_silu_silu_backward_view_0', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

from torch._dynamo.testing import rand_strided
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
import torch

@triton_heuristics.pointwise(
    size_hints={'x': 33554432}, 
    filename=__file__,
    triton_meta={'signature': {'in_out_ptr0': '*bf16', 'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'out_ptr0': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused_mul_silu_silu_backward_view_0', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 3, 'num_store': 2, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 469762048}, 'kernel_num_gb': 0.33554432, 'kernel_flop': 0},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_mul_silu_silu_backward_view_0(in_out_ptr0, in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 33554432
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), None).to(tl.float32)
    tmp1 = tl.load(in_ptr1 + (x0), None).to(tl.float32)
    tmp10 = tl.load(in_out_ptr0 + (x0), None).to(tl.float32)
    tmp2 = tmp1.to(tl.float32)
    tmp3 = -tmp2
    tmp4 = libdevice.exp(tmp3)
    tmp5 = tl.full([1], 1.0, tl.float32)
    tmp6 = tmp4 + tmp5
    tmp7 = (tmp2 / tmp6)
    tmp8 = tmp7.to(tl.float32)
    tmp9 = tmp0 * tmp8
    tmp11 = tmp0 * tmp10
    tmp12 = tmp11.to(tl.float32)
    tmp13 = tl.full([1], 1, tl.int32)
    tmp14 = (tmp13 / tmp6)
    tmp15 = tmp14 * tmp5
    tmp16 = tmp12 * tmp15
    tmp17 = tmp5 - tmp15
    tmp18 = tmp2 * tmp17
    tmp19 = tmp18 + tmp5
    tmp20 = tmp16 * tmp19
    tmp21 = tmp20.to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp9, None)
    tl.store(in_out_ptr0 + (x0), tmp21, None)


def get_args():
    arg_0 = rand_strided((4, 2048, 4096), (8388608, 4096, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_1 = rand_strided((8192, 4096), (4096, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_2 = rand_strided((8192, 4096), (4096, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_3 = rand_strided((4, 2048, 4096), (8388608, 4096, 1), device='cuda:0', dtype=torch.bfloat16)
    return arg_0, arg_1, arg_2, arg_3, 33554432,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_poi_fused_mul_silu_silu_backward_view_0.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_poi_fused_mul_silu_silu_backward_view_0.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.33554432
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/qk/cqkx2ms2vkyj3nrbgsl27ltczclts5unb2s3jtnlwgt46rgkwkp4.py
# Topologically Sorted Source Nodes: [view_18, sum_1, view_23, view_26, add_11, clone, clone_2, mul_16, mul_17, sum_4, linear_3, h, layer_norm_1, mul_18, sum_5, mul_19, sub_4, sub_5, div_1, mul_20, convert_element_type_50, add_12], Original ATen: [aten.view, aten.sum, aten.add, aten.native_layer_norm_backward, aten.native_layer_norm]
# Source node to ATen node mapping:
#   add_11 => add_11
#   add_12 => add_12
#   clone => convert_element_type_46
#   clone_2 => convert_element_type_48
#   convert_element_type_50 => convert_element_type_50
#   div_1 => div_1
#   h => add_4
#   layer_norm_1 => convert_element_type_18, mul_6, sub_1
#   linear_3 => view_11
#   mul_16 => mul_16
#   mul_17 => mul_17
#   mul_18 => mul_18
#   mul_19 => mul_19
#   mul_20 => mul_20
#   sub_4 => sub_4
#   sub_5 => sub_5
#   sum_1 => sum_1
#   sum_4 => sum_4
#   sum_5 => sum_5
#   view_18 => view_18
#   view_23 => view_23
#   view_26 => view_26
# Graph fragment:
#   %mm_2 : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=mm_2]
#   %mm_4 : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=mm_4]
#   %primals_14 : Tensor "bf16[1024][1]cuda:0" = PlaceHolder[target=primals_14]
#   %primals_3 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0" = PlaceHolder[target=primals_3]
#   %addmm_3 : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=addmm_3]
#   %getitem_16 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0" = PlaceHolder[target=getitem_16]
#   %rsqrt_1 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0" = PlaceHolder[target=rsqrt_1]
#   %sum_4 : Tensor "f32[4, 2048, 1][2048, 1, 8192]cuda:0" = PlaceHolder[target=sum_4]
#   %sum_5 : Tensor "f32[4, 2048, 1][2048, 1, 8192]cuda:0" = PlaceHolder[target=sum_5]
#   %tangents_1 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0" = PlaceHolder[target=tangents_1]
#   %sub_5 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0" = PlaceHolder[target=sub_5]
#   %view_18 : Tensor "bf16[8192, 1024][1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.reshape.default](args = (%tangents_1, [8192, 1024]), kwargs = {})
#   %sum_1 : Tensor "bf16[1, 1024][1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%view_18, [0], True), kwargs = {})
#   %view_23 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_2, [4, 2048, 1024]), kwargs = {})
#   %view_26 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_4, [4, 2048, 1024]), kwargs = {})
#   %add_11 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%view_23, %view_26), kwargs = {})
#   %convert_element_type_46 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_11, torch.float32), kwargs = {})
#   %convert_element_type_48 : Tensor "f32[1024][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%primals_14, torch.float32), kwargs = {})
#   %mul_16 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_46, %convert_element_type_48), kwargs = {})
#   %mul_17 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_16, 1024), kwargs = {})
#   %sum_4 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%mul_16, [2], True), kwargs = {})
#   %view_11 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%addmm_3, [4, 2048, 1024]), kwargs = {})
#   %add_4 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%primals_3, %view_11), kwargs = {})
#   %convert_element_type_18 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_4, torch.float32), kwargs = {})
#   %sub_1 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type_18, %getitem_16), kwargs = {})
#   %mul_6 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_1, %rsqrt_1), kwargs = {})
#   %mul_18 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_16, %mul_6), kwargs = {})
#   %sum_5 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%mul_18, [2], True), kwargs = {})
#   %mul_19 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_6, %sum_5), kwargs = {})
#   %sub_4 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%mul_17, %sum_4), kwargs = {})
#   %sub_5 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%sub_4, %mul_19), kwargs = {})
#   %div_1 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%rsqrt_1, 1024), kwargs = {})
#   %mul_20 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%div_1, %sub_5), kwargs = {})
#   %convert_element_type_50 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_20, torch.bfloat16), kwargs = {})
#   %add_12 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.add.Tensor](args = (%tangents_1, %convert_element_type_50), kwargs = {})
#   return %sum_4,%sum_5,%sub_5,%add_12
triton_per_fused_add_native_layer_norm_native_layer_norm_backward_sum_view_1 = async_compile.triton('triton_per_fused_add_native_layer_norm_native_layer_norm_backward_sum_view_1', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

from torch._dynamo.testing import rand_strided
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
import torch

@triton_heuristics.persistent_reduction(
    size_hints={'x': 8192, 'r0_': 1024},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'in_ptr3': '*bf16', 'in_ptr4': '*bf16', 'in_ptr5': '*fp32', 'in_ptr6': '*fp32', 'in_ptr7': '*bf16', 'out_ptr3': '*bf16', 'ws_ptr': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr', 'RSPLIT_SIZE': 'constexpr', 'NUM_STAGES': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (7,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]], (9,): [['tt.divisibility', 16]], (10,): [['tt.divisibility', 16]], (11,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'MixOrderReductionGrid', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused_add_native_layer_norm_native_layer_norm_backward_sum_view_1', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 8, 'num_store': -2, 'num_reduction': 2, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'RSPLIT_SIZE': 16, 'kernel_num_gb': 0.10073088, 'kernel_flop': 0}
)
@triton.jit
def triton_per_fused_add_native_layer_norm_native_layer_norm_backward_sum_view_1(in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, in_ptr5, in_ptr6, in_ptr7, out_ptr3, ws_ptr, xnumel, r0_numel, XBLOCK : tl.constexpr, RSPLIT_SIZE : tl.constexpr, NUM_STAGES : tl.constexpr):
    xnumel = 8192
    r0_numel = 1024
    R0_BLOCK: tl.constexpr = 1024
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * RSPLIT_SIZE
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = tl.full([R0_BLOCK], True, tl.int1)[None, :]
    roffset = r0_offset
    rindex = r0_index
    r0_1 = r0_index
    accum0 = tl.full([R0_BLOCK], 0, tl.float32)[None, :]
    split_size = min(RSPLIT_SIZE, xnumel - xoffset)
    for _ in tl.range(0, split_size, XBLOCK, num_stages=NUM_STAGES):
        x0 = xindex
        xindex += XBLOCK
        tmp0 = tl.load(in_ptr0 + (r0_1 + 1024*x0), None).to(tl.float32)
        tmp1 = tl.load(in_ptr1 + (r0_1 + 1024*x0), None).to(tl.float32)
        tmp4 = tl.load(in_ptr2 + (r0_1), None, eviction_policy='evict_last').to(tl.float32)
        tmp10 = tl.load(in_ptr3 + (r0_1 + 1024*x0), None).to(tl.float32)
        tmp11 = tl.load(in_ptr4 + (r0_1 + 1024*x0), None).to(tl.float32)
        tmp14 = tl.load(in_ptr5 + (x0), None, eviction_policy='evict_last')
        tmp16 = tl.load(in_ptr6 + (x0), None, eviction_policy='evict_last')
        tmp27 = tl.load(in_ptr7 + (r0_1 + 1024*x0), None).to(tl.float32)
        tmp2 = tmp0 + tmp1
        tmp3 = tmp2.to(tl.float32)
        tmp5 = tmp4.to(tl.float32)
        tmp6 = tmp3 * tmp5
        tmp7 = tl.broadcast_to(tmp6, [XBLOCK, R0_BLOCK])
        tmp9 = tl.sum(tmp7, 1)[:, None].to(tl.float32)
        tmp12 = tmp10 + tmp11
        tmp13 = tmp12.to(tl.float32)
        tmp15 = tmp13 - tmp14
        tmp17 = tmp15 * tmp16
        tmp18 = tmp6 * tmp17
        tmp19 = tl.broadcast_to(tmp18, [XBLOCK, R0_BLOCK])
        tmp21 = tl.sum(tmp19, 1)[:, None].to(tl.float32)
        tmp22 = tl.full([1, 1], 1024.0, tl.float32)
        tmp23 = tmp6 * tmp22
        tmp24 = tmp23 - tmp9
        tmp25 = tmp17 * tmp21
        tmp26 = tmp24 - tmp25
        tmp28 = tl.full([1, 1], 0.0009765625, tl.float32)
        tmp29 = tmp16 * tmp28
        tmp30 = tmp29 * tmp26
        tmp31 = tmp30.to(tl.float32)
        tmp32 = tmp27 + tmp31
        tl.store(out_ptr3 + (r0_1 + 1024*x0), tmp32, None)
        tmp33 = tl.sum(tmp27, 0)
        tmp34 = accum0 + tmp33
        accum0 = tmp34
    tl.store(ws_ptr + (tl.program_id(0) + 0 * tl.num_programs(0)) * r0_numel + r0_index, accum0, r0_mask)


def get_args():
    arg_0 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_1 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_2 = rand_strided((1024,), (1,), device='cuda:0', dtype=torch.bfloat16)
    arg_3 = rand_strided((4, 2048, 1024), (2097152, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_4 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_5 = rand_strided((4, 2048, 1), (2048, 1, 1), device='cuda:0', dtype=torch.float32)
    arg_6 = rand_strided((4, 2048, 1), (2048, 1, 1), device='cuda:0', dtype=torch.float32)
    arg_7 = rand_strided((4, 2048, 1024), (2097152, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_8 = rand_strided((4, 2048, 1024), (2097152, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_9 = torch.zeros(524288, device='cuda:0', dtype=torch.float32)
    return arg_0, arg_1, arg_2, arg_3, arg_4, arg_5, arg_6, arg_7, arg_8, arg_9, 8192, 1024,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_per_fused_add_native_layer_norm_native_layer_norm_backward_sum_view_1.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_per_fused_add_native_layer_norm_native_layer_norm_backward_sum_view_1.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.10073088
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/os/cosaz6vuykknjyaqowlrthxf3gn2eiopd2fmrve36e2iejhdi6ju.py
# Topologically Sorted Source Nodes: [view_20, linear_4, silu, mul_9, view_21, sum_2], Original ATen: [aten.view, aten.silu, aten.mul, aten.sum]
# Source node to ATen node mapping:
#   linear_4 => view_13
#   mul_9 => mul_9
#   silu => add_7, convert_element_type_23, convert_element_type_24, div, exp, neg_2
#   sum_2 => sum_2
#   view_20 => view_20
#   view_21 => view_21
# Graph fragment:
#   %mul_9 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0" = PlaceHolder[target=mul_9]
#   %view_20 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.reshape.default](args = (%mm, [4, 2048, 4096]), kwargs = {})
#   %view_13 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%addmm_4, [4, 2048, 4096]), kwargs = {})
#   %convert_element_type_23 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_13, torch.float32), kwargs = {})
#   %neg_2 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%convert_element_type_23,), kwargs = {})
#   %exp : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.exp.default](args = (%neg_2,), kwargs = {})
#   %add_7 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.add.Tensor](args = (%exp, 1), kwargs = {})
#   %div : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%convert_element_type_23, %add_7), kwargs = {})
#   %convert_element_type_24 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%div, torch.bfloat16), kwargs = {})
#   %mul_9 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%view_20, %convert_element_type_24), kwargs = {})
#   %view_21 : Tensor "bf16[8192, 4096][4096, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.reshape.default](args = (%mul_9, [8192, 4096]), kwargs = {})
#   %sum_2 : Tensor "bf16[1, 4096][4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%view_21, [0], True), kwargs = {})
#   return %buf7
triton_red_fused_mul_silu_sum_view_2 = async_compile.triton('triton_red_fused_mul_silu_sum_view_2', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

from torch._dynamo.testing import rand_strided
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
import torch

@triton_heuristics.reduction(
    size_hints={'x': 131072, 'r0_': 256},
    reduction_hint=ReductionHint.OUTER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr', 'R0_BLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_red_fused_mul_silu_sum_view_2', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 1, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 68157440, 'r0_': 0}, 'kernel_num_gb': 0.067633152, 'kernel_flop': 0}
)
@triton.jit
def triton_red_fused_mul_silu_sum_view_2(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 131072
    r0_numel = 256
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x0 = (xindex % 4096)
    x1 = xindex // 4096
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    x3 = xindex
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_2 = r0_index
        tmp0 = tl.load(in_ptr0 + (x0 + 4096*r0_2 + 1048576*x1), r0_mask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
        tmp3 = _tmp2 + tmp1
        _tmp2 = tl.where(r0_mask, tmp3, _tmp2)
    tmp2 = tl.sum(_tmp2, 1)[:, None]
    tl.store(out_ptr0 + (x3), tmp2, None)


def get_args():
    arg_0 = rand_strided((4, 2048, 4096), (8388608, 4096, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_1 = rand_strided((1, 4096, 32), (131072, 1, 4096), device='cuda:0', dtype=torch.float32)
    return arg_0, arg_1, 131072, 256,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_red_fused_mul_silu_sum_view_2.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_red_fused_mul_silu_sum_view_2.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.067633152
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/li/clirdgovd7wpgwxdnynx36ndvc5ff34w74247j7djhdmsfy5ij4d.py
# Topologically Sorted Source Nodes: [view_20, linear_4, silu, mul_9, view_21, sum_2], Original ATen: [aten.view, aten.silu, aten.mul, aten.sum]
# Source node to ATen node mapping:
#   linear_4 => view_13
#   mul_9 => mul_9
#   silu => add_7, convert_element_type_23, convert_element_type_24, div, exp, neg_2
#   sum_2 => sum_2
#   view_20 => view_20
#   view_21 => view_21
# Graph fragment:
#   %buf7 : Tensor "f32[1, 4096, 32][131072, 1, 4096]cuda:0" = PlaceHolder[target=buf7]
#   %view_20 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.reshape.default](args = (%mm, [4, 2048, 4096]), kwargs = {})
#   %view_13 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%addmm_4, [4, 2048, 4096]), kwargs = {})
#   %convert_element_type_23 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_13, torch.float32), kwargs = {})
#   %neg_2 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%convert_element_type_23,), kwargs = {})
#   %exp : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.exp.default](args = (%neg_2,), kwargs = {})
#   %add_7 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.add.Tensor](args = (%exp, 1), kwargs = {})
#   %div : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%convert_element_type_23, %add_7), kwargs = {})
#   %convert_element_type_24 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%div, torch.bfloat16), kwargs = {})
#   %mul_9 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%view_20, %convert_element_type_24), kwargs = {})
#   %view_21 : Tensor "bf16[8192, 4096][4096, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.reshape.default](args = (%mul_9, [8192, 4096]), kwargs = {})
#   %sum_2 : Tensor "bf16[1, 4096][4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%view_21, [0], True), kwargs = {})
#   return %sum_2
triton_per_fused_mul_silu_sum_view_3 = async_compile.triton('triton_per_fused_mul_silu_sum_view_3', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

from torch._dynamo.testing import rand_strided
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
import torch

@triton_heuristics.persistent_reduction(
    size_hints={'x': 4096, 'r0_': 32},
    reduction_hint=ReductionHint.OUTER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*bf16', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused_mul_silu_sum_view_3', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 1, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 540672, 'r0_': 0}, 'kernel_num_gb': 0.00053248, 'kernel_flop': 0}
)
@triton.jit
def triton_per_fused_mul_silu_sum_view_3(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 4096
    r0_numel = 32
    R0_BLOCK: tl.constexpr = 32
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = tl.full([R0_BLOCK], True, tl.int1)[None, :]
    roffset = r0_offset
    rindex = r0_index
    r0_1 = r0_index
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0 + 4096*r0_1), None)
    tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
    tmp3 = tl.sum(tmp1, 1)[:, None].to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp3, None)


def get_args():
    arg_0 = rand_strided((1, 4096, 32), (131072, 1, 4096), device='cuda:0', dtype=torch.float32)
    arg_1 = rand_strided((1, 4096), (4096, 1), device='cuda:0', dtype=torch.bfloat16)
    return arg_0, arg_1, 4096, 32,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_per_fused_mul_silu_sum_view_3.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_per_fused_mul_silu_sum_view_3.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.00053248
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/w5/cw5jcgts2ovxn5j77a7yr5ohozwzr2e2zjjef2lruym7ldyahukr.py
# Topologically Sorted Source Nodes: [convert_element_type_61, getitem_3, mul_22, slice_5, slice_6, neg_4, cat_2, getitem, mul_23, add_13, convert_element_type_62, permute_33, clone_4, convert_element_type_67, mul_24, slice_7, slice_8, neg_5, cat_3, mul_25, add_15, convert_element_type_68, permute_38, clone_5], Original ATen: [aten._to_copy, aten.slice, aten.mul, aten.neg, aten.cat, aten.add, aten.transpose, aten.clone]
# Source node to ATen node mapping:
#   add_13 => add_13
#   add_15 => add_15
#   cat_2 => cat_2
#   cat_3 => cat_3
#   clone_4 => clone_4
#   clone_5 => clone_5
#   convert_element_type_61 => convert_element_type_61
#   convert_element_type_62 => convert_element_type_62
#   convert_element_type_67 => convert_element_type_67
#   convert_element_type_68 => convert_element_type_68
#   getitem => slice_1
#   getitem_3 => slice_2
#   mul_22 => mul_22
#   mul_23 => mul_23
#   mul_24 => mul_24
#   mul_25 => mul_25
#   neg_4 => neg_4
#   neg_5 => neg_5
#   permute_33 => permute_33
#   permute_38 => permute_38
#   slice_5 => slice_5
#   slice_6 => slice_6
#   slice_7 => slice_7
#   slice_8 => slice_8
# Graph fragment:
#   %getitem_18 : Tensor "bf16[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0" = PlaceHolder[target=getitem_18]
#   %primals_7 : Tensor "f32[4096, 64][64, 1]cuda:0" = PlaceHolder[target=primals_7]
#   %primals_6 : Tensor "f32[4096, 64][64, 1]cuda:0" = PlaceHolder[target=primals_6]
#   %getitem_17 : Tensor "bf16[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0" = PlaceHolder[target=getitem_17]
#   %convert_element_type_61 : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%getitem_18, torch.float32), kwargs = {})
#   %slice_2 : Tensor "f32[2048, 64][64, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.slice.Tensor](args = (%primals_7, 0, 0, 2048), kwargs = {})
#   %mul_22 : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_61, %slice_2), kwargs = {})
#   %slice_5 : Tensor "f32[4, 16, 2048, 32][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%mul_22, 3, 0, 32), kwargs = {})
#   %slice_6 : Tensor "f32[4, 16, 2048, 32][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%mul_22, 3, 32, 64), kwargs = {})
#   %neg_4 : Tensor "f32[4, 16, 2048, 32][1048576, 32, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%slice_5,), kwargs = {})
#   %cat_2 : Tensor "f32[4, 16, 2048, 64][2097152, 131072, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.cat.default](args = ([%slice_6, %neg_4], 3), kwargs = {})
#   %slice_1 : Tensor "f32[2048, 64][64, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.slice.Tensor](args = (%primals_6, 0, 0, 2048), kwargs = {})
#   %mul_23 : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_61, %slice_1), kwargs = {})
#   %add_13 : Tensor "f32[4, 16, 2048, 64][2097152, 131072, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%cat_2, %mul_23), kwargs = {})
#   %convert_element_type_62 : Tensor "bf16[4, 16, 2048, 64][2097152, 131072, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_13, torch.bfloat16), kwargs = {})
#   %permute_33 : Tensor "bf16[4, 2048, 16, 64][2097152, 64, 131072, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.permute.default](args = (%convert_element_type_62, [0, 2, 1, 3]), kwargs = {})
#   %clone_4 : Tensor "bf16[4, 2048, 16, 64][2097152, 1024, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clone.default](args = (%permute_33,), kwargs = {memory_format: torch.contiguous_format})
#   %convert_element_type_67 : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%getitem_17, torch.float32), kwargs = {})
#   %mul_24 : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_67, %slice_2), kwargs = {})
#   %slice_7 : Tensor "f32[4, 16, 2048, 32][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%mul_24, 3, 0, 32), kwargs = {})
#   %slice_8 : Tensor "f32[4, 16, 2048, 32][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%mul_24, 3, 32, 64), kwargs = {})
#   %neg_5 : Tensor "f32[4, 16, 2048, 32][1048576, 32, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%slice_7,), kwargs = {})
#   %cat_3 : Tensor "f32[4, 16, 2048, 64][2097152, 131072, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.cat.default](args = ([%slice_8, %neg_5], 3), kwargs = {})
#   %mul_25 : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_67, %slice_1), kwargs = {})
#   %add_15 : Tensor "f32[4, 16, 2048, 64][2097152, 131072, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%cat_3, %mul_25), kwargs = {})
#   %convert_element_type_68 : Tensor "bf16[4, 16, 2048, 64][2097152, 131072, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_15, torch.bfloat16), kwargs = {})
#   %permute_38 : Tensor "bf16[4, 2048, 16, 64][2097152, 64, 131072, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.permute.default](args = (%convert_element_type_68, [0, 2, 1, 3]), kwargs = {})
#   %clone_5 : Tensor "bf16[4, 2048, 16, 64][2097152, 1024, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clone.default](args = (%permute_38,), kwargs = {memory_format: torch.contiguous_format})
#   return %clone_4,%clone_5
triton_poi_fused__to_copy_add_cat_clone_mul_neg_slice_transpose_4 = async_compile.triton('triton_poi_fused__to_copy_add_cat_clone_mul_neg_slice_transpose_4', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

from torch._dynamo.testing import rand_strided
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
import torch

@triton_heuristics.pointwise(
    size_hints={'x': 8388608}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*fp32', 'in_ptr2': '*fp32', 'in_ptr3': '*bf16', 'out_ptr0': '*bf16', 'out_ptr1': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused__to_copy_add_cat_clone_mul_neg_slice_transpose_4', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 9, 'num_store': 2, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 169345024}, 'kernel_num_gb': 0.069206016, 'kernel_flop': 0},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__to_copy_add_cat_clone_mul_neg_slice_transpose_4(in_ptr0, in_ptr1, in_ptr2, in_ptr3, out_ptr0, out_ptr1, xnumel, XBLOCK : tl.constexpr):
    xnumel = 8388608
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x0 = (xindex % 64)
    x4 = xindex // 64
    x2 = ((xindex // 1024) % 2048)
    x5 = xindex
    tmp22 = tl.load(in_ptr0 + (x5), None).to(tl.float32)
    tmp24 = tl.load(in_ptr2 + (x0 + 64*x2), None, eviction_policy='evict_last')
    tmp40 = tl.load(in_ptr3 + (x5), None).to(tl.float32)
    tmp0 = x0
    tmp1 = tl.full([1], 0, tl.int64)
    tmp2 = tmp0 >= tmp1
    tmp3 = tl.full([1], 32, tl.int64)
    tmp4 = tmp0 < tmp3
    tmp5 = tl.load(in_ptr0 + (32 + 64*x4 + (x0)), tmp4, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp6 = tmp5.to(tl.float32)
    tmp7 = tl.load(in_ptr1 + (32 + 64*x2 + (x0)), tmp4, eviction_policy='evict_last', other=0.0)
    tmp8 = tmp6 * tmp7
    tmp9 = tl.full(tmp8.shape, 0.0, tmp8.dtype)
    tmp10 = tl.where(tmp4, tmp8, tmp9)
    tmp11 = tmp0 >= tmp3
    tmp12 = tl.full([1], 64, tl.int64)
    tmp13 = tmp0 < tmp12
    tmp14 = tl.load(in_ptr0 + (64*x4 + ((-32) + x0)), tmp11, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp15 = tmp14.to(tl.float32)
    tmp16 = tl.load(in_ptr1 + (64*x2 + ((-32) + x0)), tmp11, eviction_policy='evict_last', other=0.0)
    tmp17 = tmp15 * tmp16
    tmp18 = -tmp17
    tmp19 = tl.full(tmp18.shape, 0.0, tmp18.dtype)
    tmp20 = tl.where(tmp11, tmp18, tmp19)
    tmp21 = tl.where(tmp4, tmp10, tmp20)
    tmp23 = tmp22.to(tl.float32)
    tmp25 = tmp23 * tmp24
    tmp26 = tmp21 + tmp25
    tmp27 = tmp26.to(tl.float32)
    tmp28 = tl.load(in_ptr3 + (32 + 64*x4 + (x0)), tmp4, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp29 = tmp28.to(tl.float32)
    tmp30 = tmp29 * tmp7
    tmp31 = tl.full(tmp30.shape, 0.0, tmp30.dtype)
    tmp32 = tl.where(tmp4, tmp30, tmp31)
    tmp33 = tl.load(in_ptr3 + (64*x4 + ((-32) + x0)), tmp11, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp34 = tmp33.to(tl.float32)
    tmp35 = tmp34 * tmp16
    tmp36 = -tmp35
    tmp37 = tl.full(tmp36.shape, 0.0, tmp36.dtype)
    tmp38 = tl.where(tmp11, tmp36, tmp37)
    tmp39 = tl.where(tmp4, tmp32, tmp38)
    tmp41 = tmp40.to(tl.float32)
    tmp42 = tmp41 * tmp24
    tmp43 = tmp39 + tmp42
    tmp44 = tmp43.to(tl.float32)
    tl.store(out_ptr0 + (x5), tmp27, None)
    tl.store(out_ptr1 + (x5), tmp44, None)


def get_args():
    arg_0 = rand_strided((4, 16, 2048, 64), (2097152, 64, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_1 = rand_strided((4096, 64), (64, 1), device='cuda:0', dtype=torch.float32)
    arg_2 = rand_strided((4096, 64), (64, 1), device='cuda:0', dtype=torch.float32)
    arg_3 = rand_strided((4, 16, 2048, 64), (2097152, 64, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_4 = rand_strided((4, 2048, 16, 64), (2097152, 1024, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_5 = rand_strided((4, 2048, 16, 64), (2097152, 1024, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    return arg_0, arg_1, arg_2, arg_3, arg_4, arg_5, 8388608,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_poi_fused__to_copy_add_cat_clone_mul_neg_slice_transpose_4.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_poi_fused__to_copy_add_cat_clone_mul_neg_slice_transpose_4.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.069206016
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/ll/cllbl2m22ruqvgo7cnrcn27hjjwq5twzheas5xismsgakv5h7j62.py
# Topologically Sorted Source Nodes: [view_23, view_26, add_11, clone, linear_3, h, layer_norm_1, mul_21, sum_6, sum_7, view_34, view_38, add_14, view_42, add_16, clone_6, clone_8, mul_27, mul_28, sum_12, layer_norm, mul_29, sum_13, mul_30, sub_7, sub_8, div_2, mul_31, mul_32, sum_14, sum_15, convert_element_type_77, add_17], Original ATen: [aten.view, aten.add, aten.native_layer_norm_backward, aten.native_layer_norm]
# Source node to ATen node mapping:
#   add_11 => add_11
#   add_14 => add_14
#   add_16 => add_16
#   add_17 => add_17
#   clone => convert_element_type_46
#   clone_6 => convert_element_type_73
#   clone_8 => convert_element_type_75
#   convert_element_type_77 => convert_element_type_77
#   div_2 => div_2
#   h => add_4
#   layer_norm => convert_element_type, mul, sub
#   layer_norm_1 => convert_element_type_18, mul_6, sub_1
#   linear_3 => view_11
#   mul_21 => mul_21
#   mul_27 => mul_27
#   mul_28 => mul_28
#   mul_29 => mul_29
#   mul_30 => mul_30
#   mul_31 => mul_31
#   mul_32 => mul_32
#   sub_7 => sub_7
#   sub_8 => sub_8
#   sum_12 => sum_12
#   sum_13 => sum_13
#   sum_14 => sum_14
#   sum_15 => sum_15
#   sum_6 => sum_6
#   sum_7 => sum_7
#   view_23 => view_23
#   view_26 => view_26
#   view_34 => view_34
#   view_38 => view_38
#   view_42 => view_42
# Graph fragment:
#   %mm_8 : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=mm_8]
#   %mm_10 : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=mm_10]
#   %mm_12 : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=mm_12]
#   %primals_1 : Tensor "bf16[1024][1]cuda:0" = PlaceHolder[target=primals_1]
#   %primals_3 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0" = PlaceHolder[target=primals_3]
#   %getitem_1 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0" = PlaceHolder[target=getitem_1]
#   %rsqrt : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0" = PlaceHolder[target=rsqrt]
#   %sum_12 : Tensor "f32[4, 2048, 1][2048, 1, 8192]cuda:0" = PlaceHolder[target=sum_12]
#   %sum_13 : Tensor "f32[4, 2048, 1][2048, 1, 8192]cuda:0" = PlaceHolder[target=sum_13]
#   %add_12 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0" = PlaceHolder[target=add_12]
#   %sub_8 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0" = PlaceHolder[target=sub_8]
#   %mm_2 : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=mm_2]
#   %mm_4 : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=mm_4]
#   %addmm_3 : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=addmm_3]
#   %getitem_16 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0" = PlaceHolder[target=getitem_16]
#   %rsqrt_1 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0" = PlaceHolder[target=rsqrt_1]
#   %view_23 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_2, [4, 2048, 1024]), kwargs = {})
#   %view_26 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_4, [4, 2048, 1024]), kwargs = {})
#   %add_11 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%view_23, %view_26), kwargs = {})
#   %convert_element_type_46 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_11, torch.float32), kwargs = {})
#   %view_11 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%addmm_3, [4, 2048, 1024]), kwargs = {})
#   %add_4 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%primals_3, %view_11), kwargs = {})
#   %convert_element_type_18 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_4, torch.float32), kwargs = {})
#   %sub_1 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type_18, %getitem_16), kwargs = {})
#   %mul_6 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_1, %rsqrt_1), kwargs = {})
#   %mul_21 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_46, %mul_6), kwargs = {})
#   %sum_6 : Tensor "f32[1024][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%mul_21, [0, 1]), kwargs = {})
#   %sum_7 : Tensor "f32[1024][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%convert_element_type_46, [0, 1]), kwargs = {})
#   %view_34 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_8, [4, 2048, 1024]), kwargs = {})
#   %view_38 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_10, [4, 2048, 1024]), kwargs = {})
#   %add_14 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%view_34, %view_38), kwargs = {})
#   %view_42 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%mm_12, [4, 2048, 1024]), kwargs = {})
#   %add_16 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%add_14, %view_42), kwargs = {})
#   %convert_element_type_73 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_16, torch.float32), kwargs = {})
#   %convert_element_type_75 : Tensor "f32[1024][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%primals_1, torch.float32), kwargs = {})
#   %mul_27 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_73, %convert_element_type_75), kwargs = {})
#   %mul_28 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_27, 1024), kwargs = {})
#   %sum_12 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%mul_27, [2], True), kwargs = {})
#   %convert_element_type : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%primals_3, torch.float32), kwargs = {})
#   %sub : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type, %getitem_1), kwargs = {})
#   %mul : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub, %rsqrt), kwargs = {})
#   %mul_29 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_27, %mul), kwargs = {})
#   %sum_13 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%mul_29, [2], True), kwargs = {})
#   %mul_30 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul, %sum_13), kwargs = {})
#   %sub_7 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%mul_28, %sum_12), kwargs = {})
#   %sub_8 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%sub_7, %mul_30), kwargs = {})
#   %div_2 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%rsqrt, 1024), kwargs = {})
#   %mul_31 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%div_2, %sub_8), kwargs = {})
#   %mul_32 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_73, %mul), kwargs = {})
#   %sum_14 : Tensor "f32[1024][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%mul_32, [0, 1]), kwargs = {})
#   %sum_15 : Tensor "f32[1024][1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%convert_element_type_73, [0, 1]), kwargs = {})
#   %convert_element_type_77 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_31, torch.bfloat16), kwargs = {})
#   %add_17 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%add_12, %convert_element_type_77), kwargs = {})
#   return %sum_12,%sum_13,%sub_8,%add_17
triton_per_fused_add_native_layer_norm_native_layer_norm_backward_view_5 = async_compile.triton('triton_per_fused_add_native_layer_norm_native_layer_norm_backward_view_5', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

from torch._dynamo.testing import rand_strided
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
import torch

@triton_heuristics.persistent_reduction(
    size_hints={'x': 8192, 'r0_': 1024},
    reduction_hint=ReductionHint.INNER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'in_ptr3': '*bf16', 'in_ptr4': '*bf16', 'in_ptr5': '*fp32', 'in_ptr6': '*fp32', 'in_ptr7': '*bf16', 'in_ptr8': '*bf16', 'in_ptr9': '*bf16', 'in_ptr10': '*bf16', 'in_ptr11': '*fp32', 'in_ptr12': '*fp32', 'out_ptr3': '*bf16', 'ws_ptr': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr', 'RSPLIT_SIZE': 'constexpr', 'NUM_STAGES': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (7,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]], (9,): [['tt.divisibility', 16]], (10,): [['tt.divisibility', 16]], (11,): [['tt.divisibility', 16]], (12,): [['tt.divisibility', 16]], (13,): [['tt.divisibility', 16]], (14,): [['tt.divisibility', 16]], (15,): [['tt.divisibility', 16]], (16,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'MixOrderReductionGrid', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused_add_native_layer_norm_native_layer_norm_backward_view_5', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 13, 'num_store': -2, 'num_reduction': 2, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'RSPLIT_SIZE': 16, 'kernel_num_gb': 0.151128064, 'kernel_flop': 0}
)
@triton.jit
def triton_per_fused_add_native_layer_norm_native_layer_norm_backward_view_5(in_ptr0, in_ptr1, in_ptr2, in_ptr3, in_ptr4, in_ptr5, in_ptr6, in_ptr7, in_ptr8, in_ptr9, in_ptr10, in_ptr11, in_ptr12, out_ptr3, ws_ptr, xnumel, r0_numel, XBLOCK : tl.constexpr, RSPLIT_SIZE : tl.constexpr, NUM_STAGES : tl.constexpr):
    xnumel = 8192
    r0_numel = 1024
    R0_BLOCK: tl.constexpr = 1024
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * RSPLIT_SIZE
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = tl.full([R0_BLOCK], True, tl.int1)[None, :]
    roffset = r0_offset
    rindex = r0_index
    r0_1 = r0_index
    accum0 = tl.full([R0_BLOCK], 0, tl.float32)[None, :]
    accum1 = tl.full([R0_BLOCK], 0, tl.float32)[None, :]
    accum2 = tl.full([R0_BLOCK], 0, tl.float32)[None, :]
    accum3 = tl.full([R0_BLOCK], 0, tl.float32)[None, :]
    split_size = min(RSPLIT_SIZE, xnumel - xoffset)
    for _ in tl.range(0, split_size, XBLOCK, num_stages=NUM_STAGES):
        x0 = xindex
        xindex += XBLOCK
        tmp0 = tl.load(in_ptr0 + (r0_1 + 1024*x0), None).to(tl.float32)
        tmp1 = tl.load(in_ptr1 + (r0_1 + 1024*x0), None).to(tl.float32)
        tmp3 = tl.load(in_ptr2 + (r0_1 + 1024*x0), None).to(tl.float32)
        tmp6 = tl.load(in_ptr3 + (r0_1), None, eviction_policy='evict_last').to(tl.float32)
        tmp12 = tl.load(in_ptr4 + (r0_1 + 1024*x0), None).to(tl.float32)
        tmp14 = tl.load(in_ptr5 + (x0), None, eviction_policy='evict_last')
        tmp16 = tl.load(in_ptr6 + (x0), None, eviction_policy='evict_last')
        tmp27 = tl.load(in_ptr7 + (r0_1 + 1024*x0), None).to(tl.float32)
        tmp33 = tl.load(in_ptr8 + (r0_1 + 1024*x0), None).to(tl.float32)
        tmp34 = tl.load(in_ptr9 + (r0_1 + 1024*x0), None).to(tl.float32)
        tmp37 = tl.load(in_ptr10 + (r0_1 + 1024*x0), None).to(tl.float32)
        tmp40 = tl.load(in_ptr11 + (x0), None, eviction_policy='evict_last')
        tmp42 = tl.load(in_ptr12 + (x0), None, eviction_policy='evict_last')
        tmp2 = tmp0 + tmp1
        tmp4 = tmp2 + tmp3
        tmp5 = tmp4.to(tl.float32)
        tmp7 = tmp6.to(tl.float32)
        tmp8 = tmp5 * tmp7
        tmp9 = tl.broadcast_to(tmp8, [XBLOCK, R0_BLOCK])
        tmp11 = tl.sum(tmp9, 1)[:, None].to(tl.float32)
        tmp13 = tmp12.to(tl.float32)
        tmp15 = tmp13 - tmp14
        tmp17 = tmp15 * tmp16
        tmp18 = tmp8 * tmp17
        tmp19 = tl.broadcast_to(tmp18, [XBLOCK, R0_BLOCK])
        tmp21 = tl.sum(tmp19, 1)[:, None].to(tl.float32)
        tmp22 = tl.full([1, 1], 1024.0, tl.float32)
        tmp23 = tmp8 * tmp22
        tmp24 = tmp23 - tmp11
        tmp25 = tmp17 * tmp21
        tmp26 = tmp24 - tmp25
        tmp28 = tl.full([1, 1], 0.0009765625, tl.float32)
        tmp29 = tmp16 * tmp28
        tmp30 = tmp29 * tmp26
        tmp31 = tmp30.to(tl.float32)
        tmp32 = tmp27 + tmp31
        tmp35 = tmp33 + tmp34
        tmp36 = tmp35.to(tl.float32)
        tmp38 = tmp12 + tmp37
        tmp39 = tmp38.to(tl.float32)
        tmp41 = tmp39 - tmp40
        tmp43 = tmp41 * tmp42
        tmp44 = tmp36 * tmp43
        tmp45 = tmp5 * tmp17
        tl.store(out_ptr3 + (r0_1 + 1024*x0), tmp32, None)
        tmp46 = tl.sum(tmp44, 0)
        tmp47 = accum0 + tmp46
        accum0 = tmp47
        tmp48 = tl.sum(tmp36, 0)
        tmp49 = accum1 + tmp48
        accum1 = tmp49
        tmp50 = tl.sum(tmp45, 0)
        tmp51 = accum2 + tmp50
        accum2 = tmp51
        tmp52 = tl.sum(tmp5, 0)
        tmp53 = accum3 + tmp52
        accum3 = tmp53
    tl.store(ws_ptr + (tl.program_id(0) + 0 * tl.num_programs(0)) * r0_numel + r0_index, accum0, r0_mask)
    tl.store(ws_ptr + (tl.program_id(0) + 1 * tl.num_programs(0)) * r0_numel + r0_index, accum1, r0_mask)
    tl.store(ws_ptr + (tl.program_id(0) + 2 * tl.num_programs(0)) * r0_numel + r0_index, accum2, r0_mask)
    tl.store(ws_ptr + (tl.program_id(0) + 3 * tl.num_programs(0)) * r0_numel + r0_index, accum3, r0_mask)


def get_args():
    arg_0 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_1 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_2 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_3 = rand_strided((1024,), (1,), device='cuda:0', dtype=torch.bfloat16)
    arg_4 = rand_strided((4, 2048, 1024), (2097152, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_5 = rand_strided((4, 2048, 1), (2048, 1, 1), device='cuda:0', dtype=torch.float32)
    arg_6 = rand_strided((4, 2048, 1), (2048, 1, 1), device='cuda:0', dtype=torch.float32)
    arg_7 = rand_strided((4, 2048, 1024), (2097152, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_8 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_9 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_10 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_11 = rand_strided((4, 2048, 1), (2048, 1, 1), device='cuda:0', dtype=torch.float32)
    arg_12 = rand_strided((4, 2048, 1), (2048, 1, 1), device='cuda:0', dtype=torch.float32)
    arg_13 = rand_strided((4, 2048, 1024), (2097152, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_14 = torch.zeros(2097152, device='cuda:0', dtype=torch.float32)
    return arg_0, arg_1, arg_2, arg_3, arg_4, arg_5, arg_6, arg_7, arg_8, arg_9, arg_10, arg_11, arg_12, arg_13, arg_14, 8192, 1024,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_per_fused_add_native_layer_norm_native_layer_norm_backward_view_5.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_per_fused_add_native_layer_norm_native_layer_norm_backward_view_5.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.151128064
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/dl/cdl6vgubpqr4lyaz55ihbakh4chswruhyhc4hn3bttvzo6izxllk.py
# Topologically Sorted Source Nodes: [convert_element_type_51], Original ATen: [aten.native_layer_norm_backward]
# Source node to ATen node mapping:
#   convert_element_type_51 => convert_element_type_51
# Graph fragment:
#   %sum_6 : Tensor "f32[1024][1]cuda:0" = PlaceHolder[target=sum_6]
#   %convert_element_type_51 : Tensor "bf16[1024][1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%sum_6, torch.bfloat16), kwargs = {})
#   return %convert_element_type_51
triton_poi_fused_native_layer_norm_backward_6 = async_compile.triton('triton_poi_fused_native_layer_norm_backward_6', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

from torch._dynamo.testing import rand_strided
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
import torch

@triton_heuristics.pointwise(
    size_hints={'x': 1024}, 
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused_native_layer_norm_backward_6', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 8192}, 'kernel_num_gb': 6.144e-06, 'kernel_flop': 0},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_native_layer_norm_backward_6(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 1024
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tmp1 = tmp0.to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp1, xmask)


def get_args():
    arg_0 = rand_strided((1024,), (1,), device='cuda:0', dtype=torch.float32)
    arg_1 = rand_strided((1024,), (1,), device='cuda:0', dtype=torch.bfloat16)
    return arg_0, arg_1, 1024,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_poi_fused_native_layer_norm_backward_6.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_poi_fused_native_layer_norm_backward_6.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 6.144e-06
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/ts/ctshcjlg3gfizlat4dkyi35koqtc53unjgottvikz5qqmvmt5u4b.py
# Topologically Sorted Source Nodes: [div_1, mul_20, convert_element_type_50, add_12, view_27, sum_8], Original ATen: [aten.native_layer_norm_backward, aten.add, aten.view, aten.sum]
# Source node to ATen node mapping:
#   add_12 => add_12
#   convert_element_type_50 => convert_element_type_50
#   div_1 => div_1
#   mul_20 => mul_20
#   sum_8 => sum_8
#   view_27 => view_27
# Graph fragment:
#   %add_12 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0" = PlaceHolder[target=add_12]
#   %div_1 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%rsqrt_1, 1024), kwargs = {})
#   %mul_20 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%div_1, %sub_5), kwargs = {})
#   %convert_element_type_50 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_20, torch.bfloat16), kwargs = {})
#   %add_12 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.add.Tensor](args = (%tangents_1, %convert_element_type_50), kwargs = {})
#   %view_27 : Tensor "bf16[8192, 1024][1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.reshape.default](args = (%add_12, [8192, 1024]), kwargs = {})
#   %sum_8 : Tensor "bf16[1, 1024][1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%view_27, [0], True), kwargs = {})
#   return %buf26
triton_red_fused_add_native_layer_norm_backward_sum_view_7 = async_compile.triton('triton_red_fused_add_native_layer_norm_backward_sum_view_7', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

from torch._dynamo.testing import rand_strided
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
import torch

@triton_heuristics.reduction(
    size_hints={'x': 65536, 'r0_': 128},
    reduction_hint=ReductionHint.OUTER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr', 'R0_BLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_red_fused_add_native_layer_norm_backward_sum_view_7', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 1, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 17301504, 'r0_': 0}, 'kernel_num_gb': 0.01703936, 'kernel_flop': 0}
)
@triton.jit
def triton_red_fused_add_native_layer_norm_backward_sum_view_7(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 65536
    r0_numel = 128
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x0 = (xindex % 1024)
    x1 = xindex // 1024
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    x3 = xindex
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_2 = r0_index
        tmp0 = tl.load(in_ptr0 + (x0 + 1024*r0_2 + 131072*x1), r0_mask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
        tmp3 = _tmp2 + tmp1
        _tmp2 = tl.where(r0_mask, tmp3, _tmp2)
    tmp2 = tl.sum(_tmp2, 1)[:, None]
    tl.store(out_ptr0 + (x3), tmp2, None)


def get_args():
    arg_0 = rand_strided((4, 2048, 1024), (2097152, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_1 = rand_strided((1, 1024, 64), (65536, 1, 1024), device='cuda:0', dtype=torch.float32)
    return arg_0, arg_1, 65536, 128,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_red_fused_add_native_layer_norm_backward_sum_view_7.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_red_fused_add_native_layer_norm_backward_sum_view_7.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.01703936
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/5r/c5rtvu5g73u77ctg233euqtqodrdgh6lepuqsnd2rmujrbi2mnqo.py
# Topologically Sorted Source Nodes: [div_1, mul_20, convert_element_type_50, add_12, view_27, sum_8], Original ATen: [aten.native_layer_norm_backward, aten.add, aten.view, aten.sum]
# Source node to ATen node mapping:
#   add_12 => add_12
#   convert_element_type_50 => convert_element_type_50
#   div_1 => div_1
#   mul_20 => mul_20
#   sum_8 => sum_8
#   view_27 => view_27
# Graph fragment:
#   %buf26 : Tensor "f32[1, 1024, 64][65536, 1, 1024]cuda:0" = PlaceHolder[target=buf26]
#   %div_1 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%rsqrt_1, 1024), kwargs = {})
#   %mul_20 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%div_1, %sub_5), kwargs = {})
#   %convert_element_type_50 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%mul_20, torch.bfloat16), kwargs = {})
#   %add_12 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.add.Tensor](args = (%tangents_1, %convert_element_type_50), kwargs = {})
#   %view_27 : Tensor "bf16[8192, 1024][1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.reshape.default](args = (%add_12, [8192, 1024]), kwargs = {})
#   %sum_8 : Tensor "bf16[1, 1024][1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%view_27, [0], True), kwargs = {})
#   return %sum_8
triton_per_fused_add_native_layer_norm_backward_sum_view_8 = async_compile.triton('triton_per_fused_add_native_layer_norm_backward_sum_view_8', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

from torch._dynamo.testing import rand_strided
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
import torch

@triton_heuristics.persistent_reduction(
    size_hints={'x': 1024, 'r0_': 64},
    reduction_hint=ReductionHint.OUTER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*bf16', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused_add_native_layer_norm_backward_sum_view_8', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 1, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 266240, 'r0_': 0}, 'kernel_num_gb': 0.000264192, 'kernel_flop': 0}
)
@triton.jit
def triton_per_fused_add_native_layer_norm_backward_sum_view_8(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 1024
    r0_numel = 64
    R0_BLOCK: tl.constexpr = 64
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = tl.full([R0_BLOCK], True, tl.int1)[None, :]
    roffset = r0_offset
    rindex = r0_index
    r0_1 = r0_index
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0 + 1024*r0_1), xmask, other=0.0)
    tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
    tmp3 = tl.where(xmask, tmp1, 0)
    tmp4 = tl.sum(tmp3, 1)[:, None].to(tl.float32)
    tl.store(out_ptr0 + (x0), tmp4, xmask)


def get_args():
    arg_0 = rand_strided((1, 1024, 64), (65536, 1, 1024), device='cuda:0', dtype=torch.float32)
    arg_1 = rand_strided((1, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    return arg_0, arg_1, 1024, 64,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_per_fused_add_native_layer_norm_backward_sum_view_8.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_per_fused_add_native_layer_norm_backward_sum_view_8.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.000264192
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/ec/ceczg23i7oatqx3zrmdoldqh4bmcuapwvsjodrjimsrfz7kjorsa.py
# Topologically Sorted Source Nodes: [permute_28, view_31, view_32, sum_9], Original ATen: [aten.transpose, aten.view, aten.sum]
# Source node to ATen node mapping:
#   permute_28 => permute_28
#   sum_9 => sum_9
#   view_31 => view_31
#   view_32 => view_32
# Graph fragment:
#   %getitem_19 : Tensor "bf16[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0" = PlaceHolder[target=getitem_19]
#   %permute_28 : Tensor "bf16[4, 2048, 16, 64][2097152, 1024, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.permute.default](args = (%getitem_19, [0, 2, 1, 3]), kwargs = {})
#   %view_31 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%permute_28, [4, 2048, 1024]), kwargs = {})
#   %view_32 : Tensor "bf16[8192, 1024][1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.reshape.default](args = (%view_31, [8192, 1024]), kwargs = {})
#   %sum_9 : Tensor "bf16[1, 1024][1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%view_32, [0], True), kwargs = {})
#   return %buf34
triton_red_fused_sum_transpose_view_9 = async_compile.triton('triton_red_fused_sum_transpose_view_9', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

from torch._dynamo.testing import rand_strided
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
import torch

@triton_heuristics.reduction(
    size_hints={'x': 65536, 'r0_': 128},
    reduction_hint=ReductionHint.OUTER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr', 'R0_BLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_red_fused_sum_transpose_view_9', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 1, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 17301504, 'r0_': 0}, 'kernel_num_gb': 0.01703936, 'kernel_flop': 0}
)
@triton.jit
def triton_red_fused_sum_transpose_view_9(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 65536
    r0_numel = 128
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x0 = (xindex % 1024)
    x1 = xindex // 1024
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    x3 = xindex
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_2 = r0_index
        tmp0 = tl.load(in_ptr0 + (x0 + 1024*r0_2 + 131072*x1), r0_mask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
        tmp3 = _tmp2 + tmp1
        _tmp2 = tl.where(r0_mask, tmp3, _tmp2)
    tmp2 = tl.sum(_tmp2, 1)[:, None]
    tl.store(out_ptr0 + (x3), tmp2, None)


def get_args():
    arg_0 = rand_strided((4, 16, 2048, 64), (2097152, 64, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_1 = rand_strided((1, 1024, 64), (65536, 1, 1024), device='cuda:0', dtype=torch.float32)
    return arg_0, arg_1, 65536, 128,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_red_fused_sum_transpose_view_9.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_red_fused_sum_transpose_view_9.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.01703936
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/xr/cxrsjdozrdsjkpz4zatqmtks5nobvblje7vgiomtecznt2moqvcv.py
# Topologically Sorted Source Nodes: [convert_element_type_61, getitem_3, mul_22, slice_5, slice_6, neg_4, cat_2, getitem, mul_23, add_13, convert_element_type_62, permute_33, clone_4, view_35, view_36, sum_10], Original ATen: [aten._to_copy, aten.slice, aten.mul, aten.neg, aten.cat, aten.add, aten.transpose, aten.clone, aten._unsafe_view, aten.view, aten.sum]
# Source node to ATen node mapping:
#   add_13 => add_13
#   cat_2 => cat_2
#   clone_4 => clone_4
#   convert_element_type_61 => convert_element_type_61
#   convert_element_type_62 => convert_element_type_62
#   getitem => slice_1
#   getitem_3 => slice_2
#   mul_22 => mul_22
#   mul_23 => mul_23
#   neg_4 => neg_4
#   permute_33 => permute_33
#   slice_5 => slice_5
#   slice_6 => slice_6
#   sum_10 => sum_10
#   view_35 => view_35
#   view_36 => view_36
# Graph fragment:
#   %clone_4 : Tensor "bf16[4, 2048, 16, 64][2097152, 1024, 64, 1]cuda:0" = PlaceHolder[target=clone_4]
#   %convert_element_type_61 : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%getitem_18, torch.float32), kwargs = {})
#   %slice_2 : Tensor "f32[2048, 64][64, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.slice.Tensor](args = (%primals_7, 0, 0, 2048), kwargs = {})
#   %mul_22 : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_61, %slice_2), kwargs = {})
#   %slice_5 : Tensor "f32[4, 16, 2048, 32][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%mul_22, 3, 0, 32), kwargs = {})
#   %slice_6 : Tensor "f32[4, 16, 2048, 32][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%mul_22, 3, 32, 64), kwargs = {})
#   %neg_4 : Tensor "f32[4, 16, 2048, 32][1048576, 32, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%slice_5,), kwargs = {})
#   %cat_2 : Tensor "f32[4, 16, 2048, 64][2097152, 131072, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.cat.default](args = ([%slice_6, %neg_4], 3), kwargs = {})
#   %slice_1 : Tensor "f32[2048, 64][64, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.aten.slice.Tensor](args = (%primals_6, 0, 0, 2048), kwargs = {})
#   %mul_23 : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_61, %slice_1), kwargs = {})
#   %add_13 : Tensor "f32[4, 16, 2048, 64][2097152, 131072, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%cat_2, %mul_23), kwargs = {})
#   %convert_element_type_62 : Tensor "bf16[4, 16, 2048, 64][2097152, 131072, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_13, torch.bfloat16), kwargs = {})
#   %permute_33 : Tensor "bf16[4, 2048, 16, 64][2097152, 64, 131072, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.permute.default](args = (%convert_element_type_62, [0, 2, 1, 3]), kwargs = {})
#   %clone_4 : Tensor "bf16[4, 2048, 16, 64][2097152, 1024, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.clone.default](args = (%permute_33,), kwargs = {memory_format: torch.contiguous_format})
#   %view_35 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%clone_4, [4, 2048, 1024]), kwargs = {})
#   %view_36 : Tensor "bf16[8192, 1024][1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.reshape.default](args = (%view_35, [8192, 1024]), kwargs = {})
#   %sum_10 : Tensor "bf16[1, 1024][1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sum.dim_IntList](args = (%view_36, [0], True), kwargs = {})
#   return %buf39
triton_red_fused__to_copy__unsafe_view_add_cat_clone_mul_neg_slice_sum_transpose_view_10 = async_compile.triton('triton_red_fused__to_copy__unsafe_view_add_cat_clone_mul_neg_slice_sum_transpose_view_10', '''
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties
triton_helpers.set_driver_to_gpu()

from torch._dynamo.testing import rand_strided
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
import torch

@triton_heuristics.reduction(
    size_hints={'x': 65536, 'r0_': 128},
    reduction_hint=ReductionHint.OUTER,
    filename=__file__,
    triton_meta={'signature': {'in_ptr0': '*bf16', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr', 'R0_BLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_red_fused__to_copy__unsafe_view_add_cat_clone_mul_neg_slice_sum_transpose_view_10', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 1, 'num_store': 1, 'num_reduction': 1, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 17301504, 'r0_': 0}, 'kernel_num_gb': 0.01703936, 'kernel_flop': 0}
)
@triton.jit
def triton_red_fused__to_copy__unsafe_view_add_cat_clone_mul_neg_slice_sum_transpose_view_10(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):
    xnumel = 65536
    r0_numel = 128
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = tl.full([XBLOCK], True, tl.int1)[:, None]
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    rbase = r0_base
    x0 = (xindex % 1024)
    x1 = xindex // 1024
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    x3 = xindex
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        roffset = r0_offset
        rindex = r0_index
        r0_2 = r0_index
        tmp0 = tl.load(in_ptr0 + (x0 + 1024*r0_2 + 131072*x1), r0_mask, eviction_policy='evict_first', other=0.0).to(tl.float32)
        tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
        tmp3 = _tmp2 + tmp1
        _tmp2 = tl.where(r0_mask, tmp3, _tmp2)
    tmp2 = tl.sum(_tmp2, 1)[:, None]
    tl.store(out_ptr0 + (x3), tmp2, None)


def get_args():
    arg_0 = rand_strided((4, 2048, 16, 64), (2097152, 1024, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_1 = rand_strided((1, 1024, 64), (65536, 1, 1024), device='cuda:0', dtype=torch.float32)
    return arg_0, arg_1, 65536, 128,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_red_fused__to_copy__unsafe_view_add_cat_clone_mul_neg_slice_sum_transpose_view_10.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_red_fused__to_copy__unsafe_view_add_cat_clone_mul_neg_slice_sum_transpose_view_10.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.01703936
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def recursively_apply_fns(self, fns):
        new_callables = []
        for fn, c in zip(fns, self.partitions):
            new_callables.append(fn(c))
        self.partitions = new_callables

    def call(self, args):
        primals_1, primals_3, primals_4, primals_6, primals_7, primals_8, primals_10, primals_12, primals_14, primals_16, primals_18, primals_20, getitem_1, rsqrt, view, convert_element_type_6, convert_element_type_11, permute_5, getitem_6, getitem_7, getitem_12, getitem_13, addmm_3, getitem_16, rsqrt_1, view_12, addmm_4, addmm_5, view_16, tangents_1 = args
        args.clear()
        assert_size_stride(primals_1, (1024, ), (1, ))
        assert_size_stride(primals_3, (4, 2048, 1024), (2097152, 1024, 1))
        assert_size_stride(primals_4, (1024, 1024), (1024, 1))
        assert_size_stride(primals_6, (4096, 64), (64, 1))
        assert_size_stride(primals_7, (4096, 64), (64, 1))
        assert_size_stride(primals_8, (1024, 1024), (1024, 1))
        assert_size_stride(primals_10, (1024, 1024), (1024, 1))
        assert_size_stride(primals_12, (1024, 1024), (1024, 1))
        assert_size_stride(primals_14, (1024, ), (1, ))
        assert_size_stride(primals_16, (4096, 1024), (1024, 1))
        assert_size_stride(primals_18, (4096, 1024), (1024, 1))
        assert_size_stride(primals_20, (1024, 4096), (4096, 1))
        assert_size_stride(getitem_1, (4, 2048, 1), (2048, 1, 1))
        assert_size_stride(rsqrt, (4, 2048, 1), (2048, 1, 1))
        assert_size_stride(view, (8192, 1024), (1024, 1))
        assert_size_stride(convert_element_type_6, (4, 16, 2048, 64), (2097152, 64, 1024, 1))
        assert_size_stride(convert_element_type_11, (4, 16, 2048, 64), (2097152, 64, 1024, 1))
        assert_size_stride(permute_5, (4, 16, 2048, 64), (2097152, 64, 1024, 1))
        assert_size_stride(getitem_6, (4, 16, 2048, 64), (2097152, 64, 1024, 1))
        assert_size_stride(getitem_7, (4, 16, 2048, 1), (32768, 2048, 1, 1))
        assert_size_stride(getitem_12, (), ())
        assert_size_stride(getitem_13, (), ())
        assert_size_stride(addmm_3, (8192, 1024), (1024, 1))
        assert_size_stride(getitem_16, (4, 2048, 1), (2048, 1, 1))
        assert_size_stride(rsqrt_1, (4, 2048, 1), (2048, 1, 1))
        assert_size_stride(view_12, (8192, 1024), (1024, 1))
        assert_size_stride(addmm_4, (8192, 4096), (4096, 1))
        assert_size_stride(addmm_5, (8192, 4096), (4096, 1))
        assert_size_stride(view_16, (8192, 4096), (4096, 1))
        assert_size_stride(tangents_1, (4, 2048, 1024), (2097152, 1024, 1))
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf0 = empty_strided_cuda((8192, 4096), (4096, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [view_18, linear_6, permute_11, mm], Original ATen: [aten.view, aten.t, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:38
            extern_kernels.mm(reinterpret_tensor(tangents_1, (8192, 1024), (1024, 1), 0), primals_20, out=buf0)
            del primals_20
            buf1 = empty_strided_cuda((1024, 4096), (4096, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [view_18, permute_12, permute_14], Original ATen: [aten.view, aten.t, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:39
            extern_kernels.mm(reinterpret_tensor(tangents_1, (1024, 8192), (1, 1024), 0), view_16, out=buf1)
            del view_16
            buf4 = empty_strided_cuda((4, 2048, 4096), (8388608, 4096, 1), torch.bfloat16)
            buf9 = reinterpret_tensor(addmm_5, (4, 2048, 4096), (8388608, 4096, 1), 0); del addmm_5  # reuse
            # Topologically Sorted Source Nodes: [view_20, linear_4, silu, mul_9, linear_5, mul_10, convert_element_type_39, reciprocal, mul_11, mul_12, sub_2, mul_13, add_10, mul_14, convert_element_type_41], Original ATen: [aten.view, aten.silu, aten.mul, aten.silu_backward]
            # [Provenance debug handles] triton_poi_fused_mul_silu_silu_backward_view_0:40
            stream0 = get_raw_stream(0)
            triton_poi_fused_mul_silu_silu_backward_view_0.run(buf9, buf0, addmm_4, buf4, 33554432, stream=stream0)
            del addmm_4
            del buf0
            buf10 = empty_strided_cuda((8192, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [view_20, linear_4, silu, linear_5, mul_10, convert_element_type_39, reciprocal, mul_11, mul_12, sub_2, mul_13, add_10, mul_14, convert_element_type_41, view_24, permute_19, mm_4], Original ATen: [aten.view, aten.silu, aten.mul, aten.silu_backward, aten.t, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:41
            extern_kernels.mm(reinterpret_tensor(buf9, (8192, 4096), (4096, 1), 0), primals_16, out=buf10)
            del primals_16
            buf5 = empty_strided_cuda((8192, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [view_20, linear_4, silu, mul_9, view_21, linear_5, permute_15, mm_2], Original ATen: [aten.view, aten.silu, aten.mul, aten.t, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:42
            extern_kernels.mm(reinterpret_tensor(buf4, (8192, 4096), (4096, 1), 0), primals_18, out=buf5)
            del primals_18
            buf23 = empty_strided_cuda((4, 2048, 1024), (2097152, 1024, 1), torch.bfloat16)
            # Call mix order reduction kernel
            # Topologically Sorted Source Nodes: [view_18, sum_1, view_23, view_26, add_11, clone, clone_2, mul_16, mul_17, sum_4, linear_3, h, layer_norm_1, mul_18, sum_5, mul_19, sub_4, sub_5, div_1, mul_20, convert_element_type_50, add_12], Original ATen: [aten.view, aten.sum, aten.add, aten.native_layer_norm_backward, aten.native_layer_norm]
            workspace_0 = empty_strided_cuda((524288, ), (1, ), torch.float32)
            stream0 = get_raw_stream(0)
            triton_per_fused_add_native_layer_norm_native_layer_norm_backward_sum_view_1.run(buf5, buf10, primals_14, primals_3, addmm_3, getitem_16, rsqrt_1, tangents_1, buf23, workspace_0, 8192, 1024, stream=stream0)
            buf3 = workspace_0[0 * 512 * 1024 : (0 + 1) * 512 * 1024].view(512, 1024).sum(dim=0).to(torch.bfloat16)
            del workspace_0
            del primals_14
            del tangents_1
            buf6 = empty_strided_cuda((4096, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [view_20, linear_4, silu, mul_9, view_21, permute_16, permute_18], Original ATen: [aten.view, aten.silu, aten.mul, aten.t, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:43
            extern_kernels.mm(reinterpret_tensor(buf4, (4096, 8192), (1, 4096), 0), view_12, out=buf6)
            buf7 = empty_strided_cuda((1, 4096, 32), (131072, 1, 4096), torch.float32)
            # Topologically Sorted Source Nodes: [view_20, linear_4, silu, mul_9, view_21, sum_2], Original ATen: [aten.view, aten.silu, aten.mul, aten.sum]
            # [Provenance debug handles] triton_red_fused_mul_silu_sum_view_2:44
            stream0 = get_raw_stream(0)
            triton_red_fused_mul_silu_sum_view_2.run(buf4, buf7, 131072, 256, stream=stream0)
            del buf4
            buf8 = empty_strided_cuda((1, 4096), (4096, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [view_20, linear_4, silu, mul_9, view_21, sum_2], Original ATen: [aten.view, aten.silu, aten.mul, aten.sum]
            # [Provenance debug handles] triton_per_fused_mul_silu_sum_view_3:45
            stream0 = get_raw_stream(0)
            triton_per_fused_mul_silu_sum_view_3.run(buf7, buf8, 4096, 32, stream=stream0)
            buf11 = empty_strided_cuda((4096, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [view_20, linear_4, silu, linear_5, mul_10, convert_element_type_39, reciprocal, mul_11, mul_12, sub_2, mul_13, add_10, mul_14, convert_element_type_41, view_24, permute_20, permute_22], Original ATen: [aten.view, aten.silu, aten.mul, aten.silu_backward, aten.t, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:46
            extern_kernels.mm(reinterpret_tensor(buf9, (4096, 8192), (1, 4096), 0), view_12, out=buf11)
            del view_12
            buf12 = buf7; del buf7  # reuse
            # Topologically Sorted Source Nodes: [view_20, linear_4, silu, linear_5, mul_10, convert_element_type_39, reciprocal, mul_11, mul_12, sub_2, mul_13, add_10, mul_14, convert_element_type_41, view_24, sum_3], Original ATen: [aten.view, aten.silu, aten.mul, aten.silu_backward, aten.sum]
            # [Provenance debug handles] triton_red_fused_mul_silu_sum_view_2:47
            stream0 = get_raw_stream(0)
            triton_red_fused_mul_silu_sum_view_2.run(buf9, buf12, 131072, 256, stream=stream0)
            del buf9
            buf13 = empty_strided_cuda((1, 4096), (4096, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [view_20, linear_4, silu, linear_5, mul_10, convert_element_type_39, reciprocal, mul_11, mul_12, sub_2, mul_13, add_10, mul_14, convert_element_type_41, view_24, sum_3], Original ATen: [aten.view, aten.silu, aten.mul, aten.silu_backward, aten.sum]
            # [Provenance debug handles] triton_per_fused_mul_silu_sum_view_3:48
            stream0 = get_raw_stream(0)
            triton_per_fused_mul_silu_sum_view_3.run(buf12, buf13, 4096, 32, stream=stream0)
            del buf12
            buf24 = empty_strided_cuda((8192, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [div_1, mul_20, convert_element_type_50, add_12, view_27, linear_3, permute_23, mm_6], Original ATen: [aten.native_layer_norm_backward, aten.add, aten.view, aten.t, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:49
            extern_kernels.mm(reinterpret_tensor(buf23, (8192, 1024), (1024, 1), 0), primals_12, out=buf24)
            del primals_12
            # Topologically Sorted Source Nodes: [view_29, view_30, permute_27, _scaled_dot_product_cudnn_attention_backward], Original ATen: [aten.view, aten.transpose, aten._scaled_dot_product_cudnn_attention_backward]
            # [Provenance debug handles] torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default:50
            buf28 = torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default(reinterpret_tensor(buf24, (4, 16, 2048, 64), (2097152, 64, 1024, 1), 0), convert_element_type_6, convert_element_type_11, permute_5, getitem_6, getitem_7, getitem_12, getitem_13, None, None, None, 2048, 2048, 0.0, True)
            del convert_element_type_11
            del convert_element_type_6
            del getitem_12
            del getitem_13
            del getitem_7
            del permute_5
            buf31 = buf28[2]
            assert_size_stride(buf31, (4, 16, 2048, 64), (2097152, 64, 1024, 1), 'torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default')
            assert_alignment(buf31, 16, 'torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default')
            buf32 = buf24; del buf24  # reuse
            # Topologically Sorted Source Nodes: [permute_28, view_31, view_32, linear_2, permute_29, mm_8], Original ATen: [aten.transpose, aten.view, aten.t, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:51
            extern_kernels.mm(reinterpret_tensor(buf31, (8192, 1024), (1024, 1), 0), primals_10, out=buf32)
            del primals_10
            buf29 = buf28[0]
            assert_size_stride(buf29, (4, 16, 2048, 64), (2097152, 64, 1024, 1), 'torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default')
            assert_alignment(buf29, 16, 'torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default')
            buf30 = buf28[1]
            assert_size_stride(buf30, (4, 16, 2048, 64), (2097152, 64, 1024, 1), 'torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default')
            assert_alignment(buf30, 16, 'torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default')
            del buf28
            buf36 = empty_strided_cuda((4, 2048, 16, 64), (2097152, 1024, 64, 1), torch.bfloat16)
            buf41 = empty_strided_cuda((4, 2048, 16, 64), (2097152, 1024, 64, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [convert_element_type_61, getitem_3, mul_22, slice_5, slice_6, neg_4, cat_2, getitem, mul_23, add_13, convert_element_type_62, permute_33, clone_4, convert_element_type_67, mul_24, slice_7, slice_8, neg_5, cat_3, mul_25, add_15, convert_element_type_68, permute_38, clone_5], Original ATen: [aten._to_copy, aten.slice, aten.mul, aten.neg, aten.cat, aten.add, aten.transpose, aten.clone]
            # [Provenance debug handles] triton_poi_fused__to_copy_add_cat_clone_mul_neg_slice_transpose_4:52
            stream0 = get_raw_stream(0)
            triton_poi_fused__to_copy_add_cat_clone_mul_neg_slice_transpose_4.run(buf30, primals_7, primals_6, buf29, buf36, buf41, 8388608, stream=stream0)
            del primals_6
            del primals_7
            buf37 = reinterpret_tensor(buf30, (8192, 1024), (1024, 1), 0); del buf30  # reuse
            # Topologically Sorted Source Nodes: [convert_element_type_61, getitem_3, mul_22, slice_5, slice_6, neg_4, cat_2, getitem, mul_23, add_13, convert_element_type_62, permute_33, clone_4, view_35, view_36, linear_1, permute_34, mm_10], Original ATen: [aten._to_copy, aten.slice, aten.mul, aten.neg, aten.cat, aten.add, aten.transpose, aten.clone, aten._unsafe_view, aten.view, aten.t, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:53
            extern_kernels.mm(reinterpret_tensor(buf36, (8192, 1024), (1024, 1), 0), primals_8, out=buf37)
            del primals_8
            buf42 = reinterpret_tensor(buf29, (8192, 1024), (1024, 1), 0); del buf29  # reuse
            # Topologically Sorted Source Nodes: [getitem_3, getitem, convert_element_type_67, mul_24, slice_7, slice_8, neg_5, cat_3, mul_25, add_15, convert_element_type_68, permute_38, clone_5, view_39, view_40, linear, permute_39, mm_12], Original ATen: [aten.slice, aten._to_copy, aten.mul, aten.neg, aten.cat, aten.add, aten.transpose, aten.clone, aten._unsafe_view, aten.view, aten.t, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:54
            extern_kernels.mm(reinterpret_tensor(buf41, (8192, 1024), (1024, 1), 0), primals_4, out=buf42)
            del primals_4
            buf55 = empty_strided_cuda((4, 2048, 1024), (2097152, 1024, 1), torch.bfloat16)
            # Call mix order reduction kernel
            # Topologically Sorted Source Nodes: [view_23, view_26, add_11, clone, linear_3, h, layer_norm_1, mul_21, sum_6, sum_7, view_34, view_38, add_14, view_42, add_16, clone_6, clone_8, mul_27, mul_28, sum_12, layer_norm, mul_29, sum_13, mul_30, sub_7, sub_8, div_2, mul_31, mul_32, sum_14, sum_15, convert_element_type_77, add_17], Original ATen: [aten.view, aten.add, aten.native_layer_norm_backward, aten.native_layer_norm]
            workspace_1 = empty_strided_cuda((2097152, ), (1, ), torch.float32)
            stream0 = get_raw_stream(0)
            triton_per_fused_add_native_layer_norm_native_layer_norm_backward_view_5.run(buf32, buf37, buf42, primals_1, primals_3, getitem_1, rsqrt, buf23, buf5, buf10, addmm_3, getitem_16, rsqrt_1, buf55, workspace_1, 8192, 1024, stream=stream0)
            buf18 = workspace_1[0 * 512 * 1024 : (0 + 1) * 512 * 1024].view(512, 1024).sum(dim=0)
            buf20 = workspace_1[1 * 512 * 1024 : (1 + 1) * 512 * 1024].view(512, 1024).sum(dim=0)
            buf50 = workspace_1[2 * 512 * 1024 : (2 + 1) * 512 * 1024].view(512, 1024).sum(dim=0)
            buf52 = workspace_1[3 * 512 * 1024 : (3 + 1) * 512 * 1024].view(512, 1024).sum(dim=0)
            del workspace_1
            del addmm_3
            del buf10
            del buf32
            del buf37
            del buf42
            del buf5
            del getitem_1
            del getitem_16
            del primals_1
            del primals_3
            del rsqrt
            del rsqrt_1
            buf21 = empty_strided_cuda((1024, ), (1, ), torch.bfloat16)
            # Topologically Sorted Source Nodes: [convert_element_type_51], Original ATen: [aten.native_layer_norm_backward]
            # [Provenance debug handles] triton_poi_fused_native_layer_norm_backward_6:55
            stream0 = get_raw_stream(0)
            triton_poi_fused_native_layer_norm_backward_6.run(buf18, buf21, 1024, stream=stream0)
            del buf18
            buf22 = empty_strided_cuda((1024, ), (1, ), torch.bfloat16)
            # Topologically Sorted Source Nodes: [convert_element_type_52], Original ATen: [aten.native_layer_norm_backward]
            # [Provenance debug handles] triton_poi_fused_native_layer_norm_backward_6:56
            stream0 = get_raw_stream(0)
            triton_poi_fused_native_layer_norm_backward_6.run(buf20, buf22, 1024, stream=stream0)
            del buf20
            buf25 = empty_strided_cuda((1024, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [div_1, mul_20, convert_element_type_50, add_12, view_27, permute_24, transpose_3, reshape, linear_3, permute_26], Original ATen: [aten.native_layer_norm_backward, aten.add, aten.view, aten.t, aten.transpose, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:57
            extern_kernels.mm(reinterpret_tensor(buf23, (1024, 8192), (1, 1024), 0), reinterpret_tensor(getitem_6, (8192, 1024), (1024, 1), 0), out=buf25)
            del getitem_6
            buf26 = empty_strided_cuda((1, 1024, 64), (65536, 1, 1024), torch.float32)
            # Topologically Sorted Source Nodes: [div_1, mul_20, convert_element_type_50, add_12, view_27, sum_8], Original ATen: [aten.native_layer_norm_backward, aten.add, aten.view, aten.sum]
            # [Provenance debug handles] triton_red_fused_add_native_layer_norm_backward_sum_view_7:58
            stream0 = get_raw_stream(0)
            triton_red_fused_add_native_layer_norm_backward_sum_view_7.run(buf23, buf26, 65536, 128, stream=stream0)
            del buf23
            buf27 = empty_strided_cuda((1, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [div_1, mul_20, convert_element_type_50, add_12, view_27, sum_8], Original ATen: [aten.native_layer_norm_backward, aten.add, aten.view, aten.sum]
            # [Provenance debug handles] triton_per_fused_add_native_layer_norm_backward_sum_view_8:59
            stream0 = get_raw_stream(0)
            triton_per_fused_add_native_layer_norm_backward_sum_view_8.run(buf26, buf27, 1024, 64, stream=stream0)
            buf33 = empty_strided_cuda((1024, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [permute_28, view_31, view_32, permute_30, permute_32], Original ATen: [aten.transpose, aten.view, aten.t, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:60
            extern_kernels.mm(reinterpret_tensor(buf31, (1024, 8192), (1, 1024), 0), view, out=buf33)
            buf34 = buf26; del buf26  # reuse
            # Topologically Sorted Source Nodes: [permute_28, view_31, view_32, sum_9], Original ATen: [aten.transpose, aten.view, aten.sum]
            # [Provenance debug handles] triton_red_fused_sum_transpose_view_9:61
            stream0 = get_raw_stream(0)
            triton_red_fused_sum_transpose_view_9.run(buf31, buf34, 65536, 128, stream=stream0)
            del buf31
            buf35 = empty_strided_cuda((1, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [permute_28, view_31, view_32, sum_9], Original ATen: [aten.transpose, aten.view, aten.sum]
            # [Provenance debug handles] triton_per_fused_add_native_layer_norm_backward_sum_view_8:62
            stream0 = get_raw_stream(0)
            triton_per_fused_add_native_layer_norm_backward_sum_view_8.run(buf34, buf35, 1024, 64, stream=stream0)
            buf38 = empty_strided_cuda((1024, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [convert_element_type_61, getitem_3, mul_22, slice_5, slice_6, neg_4, cat_2, getitem, mul_23, add_13, convert_element_type_62, permute_33, clone_4, view_35, view_36, permute_35, permute_37], Original ATen: [aten._to_copy, aten.slice, aten.mul, aten.neg, aten.cat, aten.add, aten.transpose, aten.clone, aten._unsafe_view, aten.view, aten.t, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:63
            extern_kernels.mm(reinterpret_tensor(buf36, (1024, 8192), (1, 1024), 0), view, out=buf38)
            buf39 = buf34; del buf34  # reuse
            # Topologically Sorted Source Nodes: [convert_element_type_61, getitem_3, mul_22, slice_5, slice_6, neg_4, cat_2, getitem, mul_23, add_13, convert_element_type_62, permute_33, clone_4, view_35, view_36, sum_10], Original ATen: [aten._to_copy, aten.slice, aten.mul, aten.neg, aten.cat, aten.add, aten.transpose, aten.clone, aten._unsafe_view, aten.view, aten.sum]
            # [Provenance debug handles] triton_red_fused__to_copy__unsafe_view_add_cat_clone_mul_neg_slice_sum_transpose_view_10:64
            stream0 = get_raw_stream(0)
            triton_red_fused__to_copy__unsafe_view_add_cat_clone_mul_neg_slice_sum_transpose_view_10.run(buf36, buf39, 65536, 128, stream=stream0)
            del buf36
            buf40 = empty_strided_cuda((1, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [convert_element_type_61, getitem_3, mul_22, slice_5, slice_6, neg_4, cat_2, getitem, mul_23, add_13, convert_element_type_62, permute_33, clone_4, view_35, view_36, sum_10], Original ATen: [aten._to_copy, aten.slice, aten.mul, aten.neg, aten.cat, aten.add, aten.transpose, aten.clone, aten._unsafe_view, aten.view, aten.sum]
            # [Provenance debug handles] triton_per_fused_add_native_layer_norm_backward_sum_view_8:65
            stream0 = get_raw_stream(0)
            triton_per_fused_add_native_layer_norm_backward_sum_view_8.run(buf39, buf40, 1024, 64, stream=stream0)
            buf43 = empty_strided_cuda((1024, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [getitem_3, getitem, convert_element_type_67, mul_24, slice_7, slice_8, neg_5, cat_3, mul_25, add_15, convert_element_type_68, permute_38, clone_5, view_39, view_40, permute_40, permute_42], Original ATen: [aten.slice, aten._to_copy, aten.mul, aten.neg, aten.cat, aten.add, aten.transpose, aten.clone, aten._unsafe_view, aten.view, aten.t, aten.mm]
            # [Provenance debug handles] extern_kernels.mm:66
            extern_kernels.mm(reinterpret_tensor(buf41, (1024, 8192), (1, 1024), 0), view, out=buf43)
            del view
            buf44 = buf39; del buf39  # reuse
            # Topologically Sorted Source Nodes: [getitem_3, getitem, convert_element_type_67, mul_24, slice_7, slice_8, neg_5, cat_3, mul_25, add_15, convert_element_type_68, permute_38, clone_5, view_39, view_40, sum_11], Original ATen: [aten.slice, aten._to_copy, aten.mul, aten.neg, aten.cat, aten.add, aten.transpose, aten.clone, aten._unsafe_view, aten.view, aten.sum]
            # [Provenance debug handles] triton_red_fused__to_copy__unsafe_view_add_cat_clone_mul_neg_slice_sum_transpose_view_10:67
            stream0 = get_raw_stream(0)
            triton_red_fused__to_copy__unsafe_view_add_cat_clone_mul_neg_slice_sum_transpose_view_10.run(buf41, buf44, 65536, 128, stream=stream0)
            del buf41
            buf45 = empty_strided_cuda((1, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [getitem_3, getitem, convert_element_type_67, mul_24, slice_7, slice_8, neg_5, cat_3, mul_25, add_15, convert_element_type_68, permute_38, clone_5, view_39, view_40, sum_11], Original ATen: [aten.slice, aten._to_copy, aten.mul, aten.neg, aten.cat, aten.add, aten.transpose, aten.clone, aten._unsafe_view, aten.view, aten.sum]
            # [Provenance debug handles] triton_per_fused_add_native_layer_norm_backward_sum_view_8:68
            stream0 = get_raw_stream(0)
            triton_per_fused_add_native_layer_norm_backward_sum_view_8.run(buf44, buf45, 1024, 64, stream=stream0)
            del buf44
            buf53 = empty_strided_cuda((1024, ), (1, ), torch.bfloat16)
            # Topologically Sorted Source Nodes: [convert_element_type_78], Original ATen: [aten.native_layer_norm_backward]
            # [Provenance debug handles] triton_poi_fused_native_layer_norm_backward_6:69
            stream0 = get_raw_stream(0)
            triton_poi_fused_native_layer_norm_backward_6.run(buf50, buf53, 1024, stream=stream0)
            del buf50
            buf54 = empty_strided_cuda((1024, ), (1, ), torch.bfloat16)
            # Topologically Sorted Source Nodes: [convert_element_type_79], Original ATen: [aten.native_layer_norm_backward]
            # [Provenance debug handles] triton_poi_fused_native_layer_norm_backward_6:70
            stream0 = get_raw_stream(0)
            triton_poi_fused_native_layer_norm_backward_6.run(buf52, buf54, 1024, stream=stream0)
            del buf52
        return (buf53, buf54, buf55, buf43, reinterpret_tensor(buf45, (1024, ), (1, ), 0), None, None, buf38, reinterpret_tensor(buf40, (1024, ), (1, ), 0), buf33, reinterpret_tensor(buf35, (1024, ), (1, ), 0), buf25, reinterpret_tensor(buf27, (1024, ), (1, ), 0), buf21, buf22, buf11, reinterpret_tensor(buf13, (4096, ), (1, ), 0), buf6, reinterpret_tensor(buf8, (4096, ), (1, ), 0), buf1, reinterpret_tensor(buf3, (1024, ), (1, ), 0), )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    primals_1 = rand_strided((1024, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    primals_3 = rand_strided((4, 2048, 1024), (2097152, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    primals_4 = rand_strided((1024, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    primals_6 = rand_strided((4096, 64), (64, 1), device='cuda:0', dtype=torch.float32)
    primals_7 = rand_strided((4096, 64), (64, 1), device='cuda:0', dtype=torch.float32)
    primals_8 = rand_strided((1024, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    primals_10 = rand_strided((1024, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    primals_12 = rand_strided((1024, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    primals_14 = rand_strided((1024, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    primals_16 = rand_strided((4096, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    primals_18 = rand_strided((4096, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    primals_20 = rand_strided((1024, 4096), (4096, 1), device='cuda:0', dtype=torch.bfloat16)
    getitem_1 = rand_strided((4, 2048, 1), (2048, 1, 1), device='cuda:0', dtype=torch.float32)
    rsqrt = rand_strided((4, 2048, 1), (2048, 1, 1), device='cuda:0', dtype=torch.float32)
    view = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    convert_element_type_6 = rand_strided((4, 16, 2048, 64), (2097152, 64, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    convert_element_type_11 = rand_strided((4, 16, 2048, 64), (2097152, 64, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    permute_5 = rand_strided((4, 16, 2048, 64), (2097152, 64, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    getitem_6 = rand_strided((4, 16, 2048, 64), (2097152, 64, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    getitem_7 = rand_strided((4, 16, 2048, 1), (32768, 2048, 1, 1), device='cuda:0', dtype=torch.float32)
    getitem_12 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    getitem_13 = rand_strided((), (), device='cuda:0', dtype=torch.int64)
    addmm_3 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    getitem_16 = rand_strided((4, 2048, 1), (2048, 1, 1), device='cuda:0', dtype=torch.float32)
    rsqrt_1 = rand_strided((4, 2048, 1), (2048, 1, 1), device='cuda:0', dtype=torch.float32)
    view_12 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    addmm_4 = rand_strided((8192, 4096), (4096, 1), device='cuda:0', dtype=torch.bfloat16)
    addmm_5 = rand_strided((8192, 4096), (4096, 1), device='cuda:0', dtype=torch.bfloat16)
    view_16 = rand_strided((8192, 4096), (4096, 1), device='cuda:0', dtype=torch.bfloat16)
    tangents_1 = rand_strided((4, 2048, 1024), (2097152, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    return [primals_1, primals_3, primals_4, primals_6, primals_7, primals_8, primals_10, primals_12, primals_14, primals_16, primals_18, primals_20, getitem_1, rsqrt, view, convert_element_type_6, convert_element_type_11, permute_5, getitem_6, getitem_7, getitem_12, getitem_13, addmm_3, getitem_16, rsqrt_1, view_12, addmm_4, addmm_5, view_16, tangents_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat)


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
