# AOT ID: ['0_inference']
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


# kernel path: /tmp/torchinductor_root/7e/c7epe6o4bdavkvubebtj2sqdi5kb57q3l7xkzr5tf5wvaalpshql.py
# Topologically Sorted Source Nodes: [q, view, q_1, xf, chunk, k, view_1, k_1, xf_1, chunk_1, getitem, mul, neg, cat, getitem_3, mul_1, add, q_2, getitem_4, mul_2, neg_1, cat_1, getitem_7, mul_3, add_1, k_2, v, view_2, v_1, out], Original ATen: [aten.view, aten.transpose, aten._to_copy, aten.split, aten.slice, aten.mul, aten.neg, aten.cat, aten.add, aten._scaled_dot_product_cudnn_attention]
# Source node to ATen node mapping:
#   add => add
#   add_1 => add_1
#   cat => cat
#   cat_1 => cat_1
#   chunk => split
#   chunk_1 => split_1
#   getitem => slice_1
#   getitem_3 => slice_2
#   getitem_4 => slice_3
#   getitem_7 => slice_4
#   k => view_3
#   k_1 => permute_4
#   k_2 => convert_element_type_12
#   mul => mul
#   mul_1 => mul_1
#   mul_2 => mul_2
#   mul_3 => mul_3
#   neg => neg
#   neg_1 => neg_1
#   out => _scaled_dot_product_cudnn_attention
#   q => view_1
#   q_1 => permute_3
#   q_2 => convert_element_type_10
#   v => view_5
#   v_1 => permute_5
#   view => view_6
#   view_1 => view_7
#   view_2 => view_8
#   xf => convert_element_type_9
#   xf_1 => convert_element_type_11
# Graph fragment:
#   %addmm : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=addmm]
#   %arg7_1 : Tensor "f32[4096, 64][64, 1]cuda:0" = PlaceHolder[target=arg7_1]
#   %arg8_1 : Tensor "f32[4096, 64][64, 1]cuda:0" = PlaceHolder[target=arg8_1]
#   %addmm_1 : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=addmm_1]
#   %view_1 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%addmm, [4, 2048, 1024]), kwargs = {})
#   %view_6 : Tensor "bf16[4, 2048, 16, 64][2097152, 1024, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%view_1, [4, 2048, -1, 64]), kwargs = {})
#   %permute_3 : Tensor "bf16[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.permute.default](args = (%view_6, [0, 2, 1, 3]), kwargs = {})
#   %convert_element_type_9 : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%permute_3, torch.float32), kwargs = {})
#   %split : [num_users=2] = call_function[target=torch.ops.aten.split.Tensor](args = (%convert_element_type_9, 32, -1), kwargs = {})
#   %view_3 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%addmm_1, [4, 2048, 1024]), kwargs = {})
#   %view_7 : Tensor "bf16[4, 2048, 16, 64][2097152, 1024, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%view_3, [4, 2048, -1, 64]), kwargs = {})
#   %permute_4 : Tensor "bf16[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.permute.default](args = (%view_7, [0, 2, 1, 3]), kwargs = {})
#   %convert_element_type_11 : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%permute_4, torch.float32), kwargs = {})
#   %split_1 : [num_users=2] = call_function[target=torch.ops.aten.split.Tensor](args = (%convert_element_type_11, 32, -1), kwargs = {})
#   %slice_1 : Tensor "f32[2048, 64][64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%arg7_1, 0, 0, 2048), kwargs = {})
#   %mul : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_9, %slice_1), kwargs = {})
#   %neg : Tensor "f32[4, 16, 2048, 32][1048576, 32, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%getitem_1,), kwargs = {})
#   %cat : Tensor "f32[4, 16, 2048, 64][2097152, 131072, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.cat.default](args = ([%neg, %getitem], -1), kwargs = {})
#   %slice_2 : Tensor "f32[2048, 64][64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%arg8_1, 0, 0, 2048), kwargs = {})
#   %mul_1 : Tensor "f32[4, 16, 2048, 64][2097152, 131072, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%cat, %slice_2), kwargs = {})
#   %add : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul, %mul_1), kwargs = {})
#   %convert_element_type_10 : Tensor "bf16[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add, torch.bfloat16), kwargs = {})
#   %slice_3 : Tensor "f32[2048, 64][64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%arg7_1, 0, 0, 2048), kwargs = {})
#   %mul_2 : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_11, %slice_3), kwargs = {})
#   %neg_1 : Tensor "f32[4, 16, 2048, 32][1048576, 32, 512, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%getitem_3,), kwargs = {})
#   %cat_1 : Tensor "f32[4, 16, 2048, 64][2097152, 131072, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.cat.default](args = ([%neg_1, %getitem_2], -1), kwargs = {})
#   %slice_4 : Tensor "f32[2048, 64][64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.slice.Tensor](args = (%arg8_1, 0, 0, 2048), kwargs = {})
#   %mul_3 : Tensor "f32[4, 16, 2048, 64][2097152, 131072, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%cat_1, %slice_4), kwargs = {})
#   %add_1 : Tensor "f32[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_2, %mul_3), kwargs = {})
#   %convert_element_type_12 : Tensor "bf16[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_1, torch.bfloat16), kwargs = {})
#   %view_5 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%addmm_2, [4, 2048, 1024]), kwargs = {})
#   %view_8 : Tensor "bf16[4, 2048, 16, 64][2097152, 1024, 64, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%view_5, [4, 2048, -1, 64]), kwargs = {})
#   %permute_5 : Tensor "bf16[4, 16, 2048, 64][2097152, 64, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.permute.default](args = (%view_8, [0, 2, 1, 3]), kwargs = {})
#   %_scaled_dot_product_cudnn_attention : [num_users=1] = call_function[target=torch.ops.aten._scaled_dot_product_cudnn_attention.default](args = (%convert_element_type_10, %convert_element_type_12, %permute_5, None, False, 0.0, True), kwargs = {})
#   return %buf3,%buf4
triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy_add_cat_mul_neg_slice_split_transpose_view_0 = async_compile.triton('triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy_add_cat_mul_neg_slice_split_transpose_view_0', '''
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
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy_add_cat_mul_neg_slice_split_transpose_view_0', 'mutated_arg_names': [], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 8, 'num_store': 2, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 168820736}, 'kernel_num_gb': 0.069206016, 'kernel_flop': 0},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy_add_cat_mul_neg_slice_split_transpose_view_0(in_ptr0, in_ptr1, in_ptr2, in_ptr3, out_ptr0, out_ptr1, xnumel, XBLOCK : tl.constexpr):
    xnumel = 8388608
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x4 = xindex
    x0 = (xindex % 64)
    x2 = ((xindex // 1024) % 2048)
    x5 = xindex // 64
    tmp0 = tl.load(in_ptr0 + (x4), None).to(tl.float32)
    tmp2 = tl.load(in_ptr1 + (x0 + 64*x2), None, eviction_policy='evict_last')
    tmp22 = tl.load(in_ptr2 + (x0 + 64*x2), None, eviction_policy='evict_last')
    tmp26 = tl.load(in_ptr3 + (x4), None).to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tmp3 = tmp1 * tmp2
    tmp4 = x0
    tmp5 = tl.full([1], 0, tl.int64)
    tmp6 = tmp4 >= tmp5
    tmp7 = tl.full([1], 32, tl.int64)
    tmp8 = tmp4 < tmp7
    tmp9 = tl.load(in_ptr0 + (32 + 64*x5 + (x0)), tmp8, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp10 = tmp9.to(tl.float32)
    tmp11 = -tmp10
    tmp12 = tl.full(tmp11.shape, 0.0, tmp11.dtype)
    tmp13 = tl.where(tmp8, tmp11, tmp12)
    tmp14 = tmp4 >= tmp7
    tmp15 = tl.full([1], 64, tl.int64)
    tmp16 = tmp4 < tmp15
    tmp17 = tl.load(in_ptr0 + (64*x5 + ((-32) + x0)), tmp14, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp18 = tmp17.to(tl.float32)
    tmp19 = tl.full(tmp18.shape, 0.0, tmp18.dtype)
    tmp20 = tl.where(tmp14, tmp18, tmp19)
    tmp21 = tl.where(tmp8, tmp13, tmp20)
    tmp23 = tmp21 * tmp22
    tmp24 = tmp3 + tmp23
    tmp25 = tmp24.to(tl.float32)
    tmp27 = tmp26.to(tl.float32)
    tmp28 = tmp27 * tmp2
    tmp29 = tl.load(in_ptr3 + (32 + 64*x5 + (x0)), tmp8, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp30 = tmp29.to(tl.float32)
    tmp31 = -tmp30
    tmp32 = tl.full(tmp31.shape, 0.0, tmp31.dtype)
    tmp33 = tl.where(tmp8, tmp31, tmp32)
    tmp34 = tl.load(in_ptr3 + (64*x5 + ((-32) + x0)), tmp14, eviction_policy='evict_last', other=0.0).to(tl.float32)
    tmp35 = tmp34.to(tl.float32)
    tmp36 = tl.full(tmp35.shape, 0.0, tmp35.dtype)
    tmp37 = tl.where(tmp14, tmp35, tmp36)
    tmp38 = tl.where(tmp8, tmp33, tmp37)
    tmp39 = tmp38 * tmp22
    tmp40 = tmp28 + tmp39
    tmp41 = tmp40.to(tl.float32)
    tl.store(out_ptr0 + (x4), tmp25, None)
    tl.store(out_ptr1 + (x4), tmp41, None)


def get_args():
    arg_0 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_1 = rand_strided((4096, 64), (64, 1), device='cuda:0', dtype=torch.float32)
    arg_2 = rand_strided((4096, 64), (64, 1), device='cuda:0', dtype=torch.float32)
    arg_3 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_4 = rand_strided((4, 16, 2048, 64), (2097152, 64, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_5 = rand_strided((4, 16, 2048, 64), (2097152, 64, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    return arg_0, arg_1, arg_2, arg_3, arg_4, arg_5, 8388608,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy_add_cat_mul_neg_slice_split_transpose_view_0.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy_add_cat_mul_neg_slice_split_transpose_view_0.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.069206016
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/ni/cnit7e5amzl77y57tf2ya7eaqvksbtqs3t7hs5sj2tgyrihh75mm.py
# Topologically Sorted Source Nodes: [linear_3, layer_norm, h], Original ATen: [aten.view, aten.native_layer_norm, aten.add]
# Source node to ATen node mapping:
#   h => add_4
#   layer_norm => add_2, add_3, convert_element_type_16, convert_element_type_17, mul_4, mul_5, rsqrt, sub, var_mean
#   linear_3 => view_11
# Graph fragment:
#   %addmm_3 : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=addmm_3]
#   %arg0_1 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0" = PlaceHolder[target=arg0_1]
#   %getitem_14 : Tensor "f32[4, 2048, 1][2048, 1, 8192]cuda:0" = PlaceHolder[target=getitem_14]
#   %buf12 : Tensor "f32[4, 2048, 1][2048, 1, 8192]cuda:0" = PlaceHolder[target=buf12]
#   %arg11_1 : Tensor "bf16[1024][1]cuda:0" = PlaceHolder[target=arg11_1]
#   %arg12_1 : Tensor "bf16[1024][1]cuda:0" = PlaceHolder[target=arg12_1]
#   %view_11 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%addmm_3, [4, 2048, 1024]), kwargs = {})
#   %convert_element_type_16 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_11, torch.float32), kwargs = {})
#   %var_mean : [num_users=2] = call_function[target=torch.ops.aten.var_mean.correction](args = (%convert_element_type_16, [2]), kwargs = {correction: 0, keepdim: True})
#   %sub : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type_16, %getitem_14), kwargs = {})
#   %add_2 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%getitem_13, 1e-05), kwargs = {})
#   %rsqrt : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.rsqrt.default](args = (%add_2,), kwargs = {})
#   %mul_4 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub, %rsqrt), kwargs = {})
#   %mul_5 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_4, %arg11_1), kwargs = {})
#   %add_3 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_5, %arg12_1), kwargs = {})
#   %convert_element_type_17 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_3, torch.bfloat16), kwargs = {})
#   %add_4 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=3] = call_function[target=torch.ops.aten.add.Tensor](args = (%arg0_1, %convert_element_type_17), kwargs = {})
#   return %getitem_14,%buf12,%add_4
triton_per_fused_add_native_layer_norm_view_1 = async_compile.triton('triton_per_fused_add_native_layer_norm_view_1', '''
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
    triton_meta={'signature': {'in_out_ptr0': '*bf16', 'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused_add_native_layer_norm_view_1', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 4, 'num_store': 1, 'num_reduction': 4, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 0, 'r0_': 67112960}, 'kernel_num_gb': 0.050335744, 'kernel_flop': 0}
)
@triton.jit
def triton_per_fused_add_native_layer_norm_view_1(in_out_ptr0, in_ptr0, in_ptr1, in_ptr2, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 8192
    r0_numel = 1024
    R0_BLOCK: tl.constexpr = 1024
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
    tmp0 = tl.load(in_out_ptr0 + (r0_1 + 1024*x0), None).to(tl.float32)
    tmp15 = tl.load(in_ptr0 + (r0_1 + 1024*x0), None).to(tl.float32)
    tmp23 = tl.load(in_ptr1 + (r0_1), None, eviction_policy='evict_last').to(tl.float32)
    tmp26 = tl.load(in_ptr2 + (r0_1), None, eviction_policy='evict_last').to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tmp2 = tl.broadcast_to(tmp1, [XBLOCK, R0_BLOCK])
    tmp4 = tl.broadcast_to(tmp2, [XBLOCK, R0_BLOCK])
    tmp6 = tl.sum(tmp4, 1)[:, None].to(tl.float32)
    tmp7 = tl.full([1, 1], 1024, tl.int32)
    tmp8 = tmp7.to(tl.float32)
    tmp9 = (tmp6 / tmp8)
    tmp10 = tmp2 - tmp9
    tmp11 = tmp10 * tmp10
    tmp12 = tl.broadcast_to(tmp11, [XBLOCK, R0_BLOCK])
    tmp14 = tl.sum(tmp12, 1)[:, None].to(tl.float32)
    tmp16 = tmp1 - tmp9
    tmp17 = tl.full([1, 1], 1024.0, tl.float32)
    tmp18 = (tmp14 / tmp17)
    tmp19 = tl.full([1, 1], 1e-05, tl.float32)
    tmp20 = tmp18 + tmp19
    tmp21 = libdevice.rsqrt(tmp20)
    tmp22 = tmp16 * tmp21
    tmp24 = tmp23.to(tl.float32)
    tmp25 = tmp22 * tmp24
    tmp27 = tmp26.to(tl.float32)
    tmp28 = tmp25 + tmp27
    tmp29 = tmp28.to(tl.float32)
    tmp30 = tmp15 + tmp29
    tl.store(in_out_ptr0 + (r0_1 + 1024*x0), tmp30, None)


def get_args():
    arg_0 = rand_strided((4, 2048, 1024), (2097152, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_1 = rand_strided((4, 2048, 1024), (2097152, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_2 = rand_strided((1024,), (1,), device='cuda:0', dtype=torch.bfloat16)
    arg_3 = rand_strided((1024,), (1,), device='cuda:0', dtype=torch.bfloat16)
    return arg_0, arg_1, arg_2, arg_3, 8192, 1024,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_per_fused_add_native_layer_norm_view_1.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_per_fused_add_native_layer_norm_view_1.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.050335744
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/4a/c4adzxogt725no36w26coq23blpkmmo5lhesvqlg2jcjxre4gauq.py
# Topologically Sorted Source Nodes: [linear_4, silu, linear_5, mul_4], Original ATen: [aten.view, aten.silu, aten.mul]
# Source node to ATen node mapping:
#   linear_4 => view_13
#   linear_5 => view_15
#   mul_4 => mul_6
#   silu => add_5, convert_element_type_24, convert_element_type_25, div, exp, neg_2
# Graph fragment:
#   %addmm_4 : Tensor "bf16[8192, 4096][4096, 1]cuda:0" = PlaceHolder[target=addmm_4]
#   %addmm_5 : Tensor "bf16[8192, 4096][4096, 1]cuda:0" = PlaceHolder[target=addmm_5]
#   %view_13 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%addmm_4, [4, 2048, 4096]), kwargs = {})
#   %convert_element_type_24 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_13, torch.float32), kwargs = {})
#   %neg_2 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.neg.default](args = (%convert_element_type_24,), kwargs = {})
#   %exp : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.exp.default](args = (%neg_2,), kwargs = {})
#   %add_5 : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%exp, 1), kwargs = {})
#   %div : Tensor "f32[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.div.Tensor](args = (%convert_element_type_24, %add_5), kwargs = {})
#   %convert_element_type_25 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%div, torch.bfloat16), kwargs = {})
#   %view_15 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%addmm_5, [4, 2048, 4096]), kwargs = {})
#   %mul_6 : Tensor "bf16[4, 2048, 4096][8388608, 4096, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%convert_element_type_25, %view_15), kwargs = {})
#   return %mul_6
triton_poi_fused_mul_silu_view_2 = async_compile.triton('triton_poi_fused_mul_silu_view_2', '''
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
    triton_meta={'signature': {'in_out_ptr0': '*bf16', 'in_ptr0': '*bf16', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_poi_fused_mul_silu_view_2', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': False, 'atomic_add_found': False, 'num_load': 2, 'num_store': 1, 'num_reduction': 0, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 268435456}, 'kernel_num_gb': 0.201326592, 'kernel_flop': 0},
    min_elem_per_thread=0
)
@triton.jit
def triton_poi_fused_mul_silu_view_2(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 33554432
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = tl.full([XBLOCK], True, tl.int1)[:]
    x0 = xindex
    tmp0 = tl.load(in_out_ptr0 + (x0), None).to(tl.float32)
    tmp8 = tl.load(in_ptr0 + (x0), None).to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tmp2 = -tmp1
    tmp3 = libdevice.exp(tmp2)
    tmp4 = tl.full([1], 1.0, tl.float32)
    tmp5 = tmp3 + tmp4
    tmp6 = (tmp1 / tmp5)
    tmp7 = tmp6.to(tl.float32)
    tmp9 = tmp7 * tmp8
    tl.store(in_out_ptr0 + (x0), tmp9, None)


def get_args():
    arg_0 = rand_strided((4, 2048, 4096), (8388608, 4096, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_1 = rand_strided((8192, 4096), (4096, 1), device='cuda:0', dtype=torch.bfloat16)
    return arg_0, arg_1, 33554432,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_poi_fused_mul_silu_view_2.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_poi_fused_mul_silu_view_2.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.201326592
    gb_per_s = num_gb / (ms / 1e3)
    print(f"{ms:.3f}ms    {num_gb:.3f}GB    {gb_per_s:.2f}GB/s")
''', device_str='cuda')


# kernel path: /tmp/torchinductor_root/sf/csfcivtrcnipikigzf3zj3f67q274satgzjgpcjz6wddwdf5sv5s.py
# Topologically Sorted Source Nodes: [linear_6, layer_norm_1, add_3], Original ATen: [aten.view, aten.native_layer_norm, aten.add]
# Source node to ATen node mapping:
#   add_3 => add_8
#   layer_norm_1 => add_6, add_7, convert_element_type_29, convert_element_type_30, mul_7, mul_8, rsqrt_1, sub_1, var_mean_1
#   linear_6 => view_17
# Graph fragment:
#   %addmm_6 : Tensor "bf16[8192, 1024][1024, 1]cuda:0" = PlaceHolder[target=addmm_6]
#   %add_4 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0" = PlaceHolder[target=add_4]
#   %getitem_16 : Tensor "f32[4, 2048, 1][2048, 1, 8192]cuda:0" = PlaceHolder[target=getitem_16]
#   %buf20 : Tensor "f32[4, 2048, 1][2048, 1, 8192]cuda:0" = PlaceHolder[target=buf20]
#   %arg19_1 : Tensor "bf16[1024][1]cuda:0" = PlaceHolder[target=arg19_1]
#   %arg20_1 : Tensor "bf16[1024][1]cuda:0" = PlaceHolder[target=arg20_1]
#   %view_17 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.reshape.default](args = (%addmm_6, [4, 2048, 1024]), kwargs = {})
#   %convert_element_type_29 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=2] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%view_17, torch.float32), kwargs = {})
#   %var_mean_1 : [num_users=2] = call_function[target=torch.ops.aten.var_mean.correction](args = (%convert_element_type_29, [2]), kwargs = {correction: 0, keepdim: True})
#   %sub_1 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.sub.Tensor](args = (%convert_element_type_29, %getitem_16), kwargs = {})
#   %add_6 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%getitem_15, 1e-05), kwargs = {})
#   %rsqrt_1 : Tensor "f32[4, 2048, 1][2048, 1, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.rsqrt.default](args = (%add_6,), kwargs = {})
#   %mul_7 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%sub_1, %rsqrt_1), kwargs = {})
#   %mul_8 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = (%mul_7, %arg19_1), kwargs = {})
#   %add_7 : Tensor "f32[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%mul_8, %arg20_1), kwargs = {})
#   %convert_element_type_30 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.prims.convert_element_type.default](args = (%add_7, torch.bfloat16), kwargs = {})
#   %add_8 : Tensor "bf16[4, 2048, 1024][2097152, 1024, 1]cuda:0"[num_users=1] = call_function[target=torch.ops.aten.add.Tensor](args = (%add_4, %convert_element_type_30), kwargs = {})
#   return %getitem_16,%buf20,%add_8
triton_per_fused_add_native_layer_norm_view_3 = async_compile.triton('triton_per_fused_add_native_layer_norm_view_3', '''
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
    triton_meta={'signature': {'in_out_ptr0': '*bf16', 'in_ptr0': '*bf16', 'in_ptr1': '*bf16', 'in_ptr2': '*bf16', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {}, 'native_matmul': False, 'enable_fp_fusion': True, 'launch_pdl': False, 'disable_ftz': False, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]]}]},
    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused_add_native_layer_norm_view_3', 'mutated_arg_names': ['in_out_ptr0'], 'optimize_mem': True, 'no_x_dim': None, 'atomic_add_found': False, 'num_load': 4, 'num_store': 1, 'num_reduction': 4, 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False, 'tiling_scores': {'x': 0, 'r0_': 67112960}, 'kernel_num_gb': 0.050335744, 'kernel_flop': 0}
)
@triton.jit
def triton_per_fused_add_native_layer_norm_view_3(in_out_ptr0, in_ptr0, in_ptr1, in_ptr2, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 8192
    r0_numel = 1024
    R0_BLOCK: tl.constexpr = 1024
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
    tmp0 = tl.load(in_ptr0 + (r0_1 + 1024*x0), None).to(tl.float32)
    tmp15 = tl.load(in_out_ptr0 + (r0_1 + 1024*x0), None).to(tl.float32)
    tmp23 = tl.load(in_ptr1 + (r0_1), None, eviction_policy='evict_last').to(tl.float32)
    tmp26 = tl.load(in_ptr2 + (r0_1), None, eviction_policy='evict_last').to(tl.float32)
    tmp1 = tmp0.to(tl.float32)
    tmp2 = tl.broadcast_to(tmp1, [XBLOCK, R0_BLOCK])
    tmp4 = tl.broadcast_to(tmp2, [XBLOCK, R0_BLOCK])
    tmp6 = tl.sum(tmp4, 1)[:, None].to(tl.float32)
    tmp7 = tl.full([1, 1], 1024, tl.int32)
    tmp8 = tmp7.to(tl.float32)
    tmp9 = (tmp6 / tmp8)
    tmp10 = tmp2 - tmp9
    tmp11 = tmp10 * tmp10
    tmp12 = tl.broadcast_to(tmp11, [XBLOCK, R0_BLOCK])
    tmp14 = tl.sum(tmp12, 1)[:, None].to(tl.float32)
    tmp16 = tmp1 - tmp9
    tmp17 = tl.full([1, 1], 1024.0, tl.float32)
    tmp18 = (tmp14 / tmp17)
    tmp19 = tl.full([1, 1], 1e-05, tl.float32)
    tmp20 = tmp18 + tmp19
    tmp21 = libdevice.rsqrt(tmp20)
    tmp22 = tmp16 * tmp21
    tmp24 = tmp23.to(tl.float32)
    tmp25 = tmp22 * tmp24
    tmp27 = tmp26.to(tl.float32)
    tmp28 = tmp25 + tmp27
    tmp29 = tmp28.to(tl.float32)
    tmp30 = tmp15 + tmp29
    tl.store(in_out_ptr0 + (r0_1 + 1024*x0), tmp30, None)


def get_args():
    arg_0 = rand_strided((4, 2048, 1024), (2097152, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_1 = rand_strided((8192, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg_2 = rand_strided((1024,), (1,), device='cuda:0', dtype=torch.bfloat16)
    arg_3 = rand_strided((1024,), (1,), device='cuda:0', dtype=torch.bfloat16)
    return arg_0, arg_1, arg_2, arg_3, 8192, 1024,


def call(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_per_fused_add_native_layer_norm_view_3.run(*args, stream=stream0)


def benchmark_all_configs(args):
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        return triton_per_fused_add_native_layer_norm_view_3.benchmark_all_configs(*args)


if __name__ == '__main__':
    from torch._inductor.runtime.benchmarking import benchmarker

    args = get_args()
    ms = benchmarker.benchmark(lambda: call(args), device='cuda', rep=40)
    num_gb = 0.050335744
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
        arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1, arg19_1, arg20_1 = args
        args.clear()
        assert_size_stride(arg0_1, (4, 2048, 1024), (2097152, 1024, 1))
        assert_size_stride(arg1_1, (1024, 1024), (1024, 1))
        assert_size_stride(arg2_1, (1024, ), (1, ))
        assert_size_stride(arg3_1, (1024, 1024), (1024, 1))
        assert_size_stride(arg4_1, (1024, ), (1, ))
        assert_size_stride(arg5_1, (1024, 1024), (1024, 1))
        assert_size_stride(arg6_1, (1024, ), (1, ))
        assert_size_stride(arg7_1, (4096, 64), (64, 1))
        assert_size_stride(arg8_1, (4096, 64), (64, 1))
        assert_size_stride(arg9_1, (1024, 1024), (1024, 1))
        assert_size_stride(arg10_1, (1024, ), (1, ))
        assert_size_stride(arg11_1, (1024, ), (1, ))
        assert_size_stride(arg12_1, (1024, ), (1, ))
        assert_size_stride(arg13_1, (4096, 1024), (1024, 1))
        assert_size_stride(arg14_1, (4096, ), (1, ))
        assert_size_stride(arg15_1, (4096, 1024), (1024, 1))
        assert_size_stride(arg16_1, (4096, ), (1, ))
        assert_size_stride(arg17_1, (1024, 4096), (4096, 1))
        assert_size_stride(arg18_1, (1024, ), (1, ))
        assert_size_stride(arg19_1, (1024, ), (1, ))
        assert_size_stride(arg20_1, (1024, ), (1, ))
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf0 = empty_strided_cuda((8192, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [q], Original ATen: [aten.view, aten.t, aten.addmm]
            # [Provenance debug handles] extern_kernels.addmm:1
            extern_kernels.addmm(arg2_1, reinterpret_tensor(arg0_1, (8192, 1024), (1024, 1), 0), reinterpret_tensor(arg1_1, (1024, 1024), (1, 1024), 0), alpha=1, beta=1, out=buf0)
            del arg1_1
            del arg2_1
            buf1 = empty_strided_cuda((8192, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [k], Original ATen: [aten.view, aten.t, aten.addmm]
            # [Provenance debug handles] extern_kernels.addmm:2
            extern_kernels.addmm(arg4_1, reinterpret_tensor(arg0_1, (8192, 1024), (1024, 1), 0), reinterpret_tensor(arg3_1, (1024, 1024), (1, 1024), 0), alpha=1, beta=1, out=buf1)
            del arg3_1
            del arg4_1
            buf2 = empty_strided_cuda((8192, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [v], Original ATen: [aten.view, aten.t, aten.addmm]
            # [Provenance debug handles] extern_kernels.addmm:3
            extern_kernels.addmm(arg6_1, reinterpret_tensor(arg0_1, (8192, 1024), (1024, 1), 0), reinterpret_tensor(arg5_1, (1024, 1024), (1, 1024), 0), alpha=1, beta=1, out=buf2)
            del arg5_1
            del arg6_1
            buf3 = empty_strided_cuda((4, 16, 2048, 64), (2097152, 64, 1024, 1), torch.bfloat16)
            buf4 = empty_strided_cuda((4, 16, 2048, 64), (2097152, 64, 1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [q, view, q_1, xf, chunk, k, view_1, k_1, xf_1, chunk_1, getitem, mul, neg, cat, getitem_3, mul_1, add, q_2, getitem_4, mul_2, neg_1, cat_1, getitem_7, mul_3, add_1, k_2, v, view_2, v_1, out], Original ATen: [aten.view, aten.transpose, aten._to_copy, aten.split, aten.slice, aten.mul, aten.neg, aten.cat, aten.add, aten._scaled_dot_product_cudnn_attention]
            # [Provenance debug handles] triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy_add_cat_mul_neg_slice_split_transpose_view_0:4
            stream0 = get_raw_stream(0)
            triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy_add_cat_mul_neg_slice_split_transpose_view_0.run(buf0, arg7_1, arg8_1, buf1, buf3, buf4, 8388608, stream=stream0)
            del arg7_1
            del arg8_1
            del buf0
            del buf1
            # Topologically Sorted Source Nodes: [q, view, q_1, xf, chunk, k, view_1, k_1, xf_1, chunk_1, getitem, mul, neg, cat, getitem_3, mul_1, add, q_2, getitem_4, mul_2, neg_1, cat_1, getitem_7, mul_3, add_1, k_2, v, view_2, v_1, out], Original ATen: [aten.view, aten.transpose, aten._to_copy, aten.split, aten.slice, aten.mul, aten.neg, aten.cat, aten.add, aten._scaled_dot_product_cudnn_attention]
            # [Provenance debug handles] torch.ops.aten._scaled_dot_product_cudnn_attention.default:5
            buf5 = torch.ops.aten._scaled_dot_product_cudnn_attention.default(buf3, buf4, reinterpret_tensor(buf2, (4, 16, 2048, 64), (2097152, 64, 1024, 1), 0), None, False, 0.0, True)
            del buf2
            del buf3
            buf6 = buf5[0]
            assert_size_stride(buf6, (4, 16, 2048, 64), (2097152, 64, 1024, 1), 'torch.ops.aten._scaled_dot_product_cudnn_attention.default')
            assert_alignment(buf6, 16, 'torch.ops.aten._scaled_dot_product_cudnn_attention.default')
            del buf5
            buf10 = reinterpret_tensor(buf4, (8192, 1024), (1024, 1), 0); del buf4  # reuse
            # Topologically Sorted Source Nodes: [transpose_3, reshape, linear_3], Original ATen: [aten.transpose, aten.view, aten.t, aten.addmm]
            # [Provenance debug handles] extern_kernels.addmm:6
            extern_kernels.addmm(arg10_1, reinterpret_tensor(buf6, (8192, 1024), (1024, 1), 0), reinterpret_tensor(arg9_1, (1024, 1024), (1, 1024), 0), alpha=1, beta=1, out=buf10)
            del arg10_1
            del arg9_1
            del buf6
            buf14 = reinterpret_tensor(buf10, (4, 2048, 1024), (2097152, 1024, 1), 0); del buf10  # reuse
            # Topologically Sorted Source Nodes: [linear_3, layer_norm, h], Original ATen: [aten.view, aten.native_layer_norm, aten.add]
            # [Provenance debug handles] triton_per_fused_add_native_layer_norm_view_1:7
            stream0 = get_raw_stream(0)
            triton_per_fused_add_native_layer_norm_view_1.run(buf14, arg0_1, arg11_1, arg12_1, 8192, 1024, stream=stream0)
            del arg0_1
            del arg11_1
            del arg12_1
            buf15 = empty_strided_cuda((8192, 4096), (4096, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [linear_4], Original ATen: [aten.view, aten.t, aten.addmm]
            # [Provenance debug handles] extern_kernels.addmm:8
            extern_kernels.addmm(arg14_1, reinterpret_tensor(buf14, (8192, 1024), (1024, 1), 0), reinterpret_tensor(arg13_1, (1024, 4096), (1, 1024), 0), alpha=1, beta=1, out=buf15)
            del arg13_1
            del arg14_1
            buf16 = empty_strided_cuda((8192, 4096), (4096, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [linear_5], Original ATen: [aten.view, aten.t, aten.addmm]
            # [Provenance debug handles] extern_kernels.addmm:9
            extern_kernels.addmm(arg16_1, reinterpret_tensor(buf14, (8192, 1024), (1024, 1), 0), reinterpret_tensor(arg15_1, (1024, 4096), (1, 1024), 0), alpha=1, beta=1, out=buf16)
            del arg15_1
            del arg16_1
            buf17 = reinterpret_tensor(buf15, (4, 2048, 4096), (8388608, 4096, 1), 0); del buf15  # reuse
            # Topologically Sorted Source Nodes: [linear_4, silu, linear_5, mul_4], Original ATen: [aten.view, aten.silu, aten.mul]
            # [Provenance debug handles] triton_poi_fused_mul_silu_view_2:10
            stream0 = get_raw_stream(0)
            triton_poi_fused_mul_silu_view_2.run(buf17, buf16, 33554432, stream=stream0)
            del buf16
            buf18 = empty_strided_cuda((8192, 1024), (1024, 1), torch.bfloat16)
            # Topologically Sorted Source Nodes: [linear_4, silu, linear_5, mul_4, linear_6], Original ATen: [aten.view, aten.silu, aten.mul, aten.t, aten.addmm]
            # [Provenance debug handles] extern_kernels.addmm:11
            extern_kernels.addmm(arg18_1, reinterpret_tensor(buf17, (8192, 4096), (4096, 1), 0), reinterpret_tensor(arg17_1, (4096, 1024), (1, 4096), 0), alpha=1, beta=1, out=buf18)
            del arg17_1
            del arg18_1
            del buf17
            buf22 = buf14; del buf14  # reuse
            # Topologically Sorted Source Nodes: [linear_6, layer_norm_1, add_3], Original ATen: [aten.view, aten.native_layer_norm, aten.add]
            # [Provenance debug handles] triton_per_fused_add_native_layer_norm_view_3:12
            stream0 = get_raw_stream(0)
            triton_per_fused_add_native_layer_norm_view_3.run(buf22, buf18, arg19_1, arg20_1, 8192, 1024, stream=stream0)
            del arg19_1
            del arg20_1
            del buf18
        return (buf22, )

runner = Runner(partitions=[])
call = runner.call
recursively_apply_fns = runner.recursively_apply_fns


def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = rand_strided((4, 2048, 1024), (2097152, 1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg1_1 = rand_strided((1024, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg2_1 = rand_strided((1024, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg3_1 = rand_strided((1024, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg4_1 = rand_strided((1024, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg5_1 = rand_strided((1024, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg6_1 = rand_strided((1024, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg7_1 = rand_strided((4096, 64), (64, 1), device='cuda:0', dtype=torch.float32)
    arg8_1 = rand_strided((4096, 64), (64, 1), device='cuda:0', dtype=torch.float32)
    arg9_1 = rand_strided((1024, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg10_1 = rand_strided((1024, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg11_1 = rand_strided((1024, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg12_1 = rand_strided((1024, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg13_1 = rand_strided((4096, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg14_1 = rand_strided((4096, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg15_1 = rand_strided((4096, 1024), (1024, 1), device='cuda:0', dtype=torch.bfloat16)
    arg16_1 = rand_strided((4096, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg17_1 = rand_strided((1024, 4096), (4096, 1), device='cuda:0', dtype=torch.bfloat16)
    arg18_1 = rand_strided((1024, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg19_1 = rand_strided((1024, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    arg20_1 = rand_strided((1024, ), (1, ), device='cuda:0', dtype=torch.bfloat16)
    return [arg0_1, arg1_1, arg2_1, arg3_1, arg4_1, arg5_1, arg6_1, arg7_1, arg8_1, arg9_1, arg10_1, arg11_1, arg12_1, arg13_1, arg14_1, arg15_1, arg16_1, arg17_1, arg18_1, arg19_1, arg20_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat)


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
