"""Bad input to the attention entry points, without a GPU: every case raises the documented exception
(TypeError for a wrong kind of object or dtype, ValueError for device, rank, shape, mismatch, layout),
naming the argument and its value, before any launch.

Tensors on a CUDA device are described by DLTensor structs with a made-up address and checked with
xstage_attention_check, which runs every check of xstage_attention_forward and never launches.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import xstage
from xstage import _native

BF16 = (_native.KDL_BFLOAT, 16)
F32 = (_native.KDL_FLOAT, 32)
FAKE_ADDRESS = 1 << 20  # aligned, never dereferenced: only checked


def contiguous_strides(shape):
    strides, s = [], 1
    for n in reversed(shape):
        strides.append(s)
        s *= n
    return list(reversed(strides))


def desc(shape, dtype=BF16, device=(_native.KDL_CUDA, 0), strides=None, address=FAKE_ADDRESS):
    slot = _native.TensorSlot()
    dl = slot.dl
    dl.data = address
    dl.device_type, dl.device_id = device
    dl.dtype_code, dl.dtype_bits = dtype
    slot.set_dims(shape, contiguous_strides(shape) if strides is None else strides)
    return slot


def check(q, k, v, out, lse=None, scale=0.0):
    """Status and message of xstage_attention_check."""
    lib = _native.lib()
    status = lib.xstage_attention_check(q.address, k.address, v.address, out.address,
                                        None if lse is None else lse.address, scale)
    return status, _native.last_error()


def raised(status):
    with pytest.raises((TypeError, ValueError, RuntimeError)) as info:
        _native.raise_for(status, "xstage.attention")
    return info


# Shape agreement and view rules are the public C++ API's, built with the kernel.
needs_kernel_rules = pytest.mark.skipif(not xstage.has_cuda(),
                                        reason="shape and view rules come with the kernel (CUDA build)")

B, SQ, SKV, H, D = 2, 1000, 512, 3, 128
QS, KS = (B, SQ, H, D), (B, SKV, H, D)


def good():
    return desc(QS), desc(KS), desc(KS), desc(QS)


def test_valid_problem_passes_every_check():
    status, message = check(*good(), lse=desc((B, H, SQ), dtype=F32))
    assert (status, message) == (_native.OK, "")


@pytest.mark.parametrize("case, expected_status, words", [
    ("q_dtype", _native.ERR_TYPE, ["q: dtype float32", "accepted: bfloat16"]),
    ("k_dtype", _native.ERR_TYPE, ["k: dtype float16", "accepted: bfloat16"]),
    ("q_cpu", _native.ERR_VALUE, ["q: device cpu", "CUDA"]),
    ("v_other_gpu", _native.ERR_VALUE, ["v: device cuda:1", "q is on cuda:0"]),
    ("q_rank", _native.ERR_VALUE, ["q: rank 3", "[2, 1000, 384]", "accepted: 4"]),
    ("head_dim", _native.ERR_VALUE, ["q: head_dim", " 96", "accepted: 64, 128"]),
    pytest.param("batch", _native.ERR_VALUE, ["k batch (dimension 0) 3", "q's 2"], marks=needs_kernel_rules),
    pytest.param("heads", _native.ERR_VALUE, ["v heads (dimension 2) 4", "q's 3"], marks=needs_kernel_rules),
    pytest.param("kv_seq", _native.ERR_VALUE, ["v seq (dimension 1) 511", "k's 512"], marks=needs_kernel_rules),
    pytest.param("kv_head_dim", _native.ERR_VALUE, ["k head_dim (dimension 3) 64 differs from q's 128"],
                 marks=needs_kernel_rules),
    pytest.param("out_shape", _native.ERR_VALUE, ["out seq (dimension 1) 512", "q's 1000"], marks=needs_kernel_rules),
    ("lse_shape", _native.ERR_VALUE, ["lse: shape [2, 1000, 3]", "accepted: [2, 3, 1000]"]),
    ("lse_dtype", _native.ERR_TYPE, ["lse: dtype bfloat16", "accepted: float32"]),
    ("scale", _native.ERR_VALUE, ["softmax_scale: -1", "positive"]),
    pytest.param("empty_seq", _native.ERR_VALUE, ["q seq (dimension 1) 0"], marks=needs_kernel_rules),
])
def test_bad_input(case, expected_status, words):
    q, k, v, out = good()
    lse, scale = None, 0.0
    if case == "q_dtype":
        q = desc(QS, dtype=F32)
    elif case == "k_dtype":
        k = desc(KS, dtype=(_native.KDL_FLOAT, 16))
    elif case == "q_cpu":
        q = desc(QS, device=(_native.KDL_CPU, 0))
    elif case == "v_other_gpu":
        v = desc(KS, device=(_native.KDL_CUDA, 1))
    elif case == "q_rank":
        q = desc((B, SQ, H * D))
    elif case == "head_dim":
        q, k, v, out = desc((B, SQ, H, 96)), desc((B, SKV, H, 96)), desc((B, SKV, H, 96)), desc((B, SQ, H, 96))
    elif case == "batch":
        k = desc((3, SKV, H, D))
    elif case == "heads":
        v = desc((B, SKV, 4, D))
    elif case == "kv_seq":
        v = desc((B, SKV - 1, H, D))
    elif case == "kv_head_dim":
        k = desc((B, SKV, H, 64))
    elif case == "out_shape":
        out = desc(KS)
    elif case == "lse_shape":
        lse = desc((B, SQ, H), dtype=F32)
    elif case == "lse_dtype":
        lse = desc((B, H, SQ))
    elif case == "scale":
        scale = -1.0
    elif case == "empty_seq":
        q, out = desc((B, 0, H, D)), desc((B, 0, H, D))
    status, message = check(q, k, v, out, lse, scale)
    assert status == expected_status, message
    for w in words:
        assert w in message
    info = raised(status)
    assert str(info.value).startswith("xstage.attention: ")
    assert info.type is (TypeError if expected_status == _native.ERR_TYPE else ValueError)




@needs_kernel_rules
@pytest.mark.parametrize("name, strides, words", [
    # [B, S, H, D] views of a packed [B, S, 3, H, D] QKV tensor: read in place
    ("packed_qkv", [SQ * 3 * H * D, 3 * H * D, D, 1], None),
    # [B, H, S, D] storage transposed to [B, S, H, D]: read in place
    ("bhsd_transposed", [H * SQ * D, D, SQ * D, 1], None),
    ("head_dim_strided", [SQ * H * D * 2, H * D * 2, D * 2, 2], ["q stride[3] 2", "contiguous"]),
    ("seq_stride_odd", [SQ * (H * D + 4), H * D + 4, D, 1], ["q stride[1] 388", "multiples of 8"]),
    ("broadcast_batch", [0, H * D, D, 1], ["q stride[0] 0", "positive"]),
])
def test_views(name, strides, words):
    q = desc(QS, strides=strides)
    k, v, out = desc(KS), desc(KS), desc(QS)
    status, message = check(q, k, v, out)
    slot_status = _native.lib().xstage_attention_view_check(q.address, b"q")
    if words is None:
        assert (status, message) == (_native.OK, "")
        assert slot_status == _native.OK
    else:
        assert status == _native.ERR_LAYOUT, message
        assert slot_status == _native.ERR_LAYOUT
        for w in words:
            assert w in message


@needs_kernel_rules
def test_size_one_dimensions_take_any_stride():
    # torch gives size-1 dimensions arbitrary strides (e.g. after slicing); they are never stepped.
    q = desc((1, SQ, 1, D), strides=[7, D, 3, 1])
    k = desc((1, SKV, 1, D))
    status, message = check(q, k, desc((1, SKV, 1, D)), desc((1, SQ, 1, D)))
    assert (status, message) == (_native.OK, "")


@needs_kernel_rules
def test_misaligned_pointer_is_a_layout_error_and_out_layout_a_value_error():
    q = desc(QS, address=FAKE_ADDRESS + 2)
    status, message = check(q, desc(KS), desc(KS), desc(QS))
    assert status == _native.ERR_LAYOUT and "q data pointer not 16-byte aligned" in message
    out = desc(QS, strides=[SQ * H * D * 2, H * D * 2, D * 2, 2])
    status, message = check(desc(QS), desc(KS), desc(KS), out)
    assert status == _native.ERR_VALUE and "out stride[3] 2" in message


def test_numpy_arrays_are_rejected_before_any_launch():
    a = np.zeros((B, 64, H, D), dtype=np.float32)
    out = np.zeros_like(a)
    with pytest.raises(ValueError, match=r"xstage.attention_dlpack: q: device cpu; accepted: a CUDA device tensor"):
        xstage.attention_dlpack(a, a, a, out)
    with pytest.raises(TypeError, match=r"xstage.attention: q is a numpy.ndarray; accepted: a torch.Tensor"):
        xstage.attention(a, a, a)


def test_objects_without_dlpack_are_type_errors():
    a = np.zeros((B, 64, H, D), dtype=np.float32)
    with pytest.raises(TypeError, match=r"xstage.attention_dlpack: k is a list; accepted: a tensor with __dlpack__"):
        xstage.attention_dlpack(a, [1.0], a, a)


@pytest.mark.parametrize("scale, exc, words", [
    (-0.5, ValueError, "softmax_scale -0.5; accepted: a positive finite number"),
    (float("inf"), ValueError, "softmax_scale inf"),
    (0.0, ValueError, "softmax_scale 0.0"),
    ("0.1", TypeError, "softmax_scale is a str"),
    (True, TypeError, "softmax_scale is a bool"),
])
def test_bad_softmax_scale(scale, exc, words):
    a = np.zeros((B, 64, H, D), dtype=np.float32)
    with pytest.raises(exc, match=words):
        xstage.attention_dlpack(a, a, a, a, softmax_scale=scale)


def test_torch_cpu_tensors_are_rejected():
    torch = pytest.importorskip("torch")
    q = torch.zeros((B, 64, H, D), dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"xstage.attention: q: device cpu; accepted: a CUDA device tensor"):
        xstage.attention(q, q, q)
    with pytest.raises(TypeError, match=r"xstage.attention: v is a numpy.ndarray"):
        xstage.attention(q, q, q.float().numpy())
    with pytest.raises(ValueError, match=r"xstage.attention: q: device cpu"):
        torch.ops.xstage.attention(q, q, q, 0.0, False)


def test_without_cuda_the_gpu_entry_points_say_so():
    if xstage.has_cuda():
        pytest.skip("built with CUDA")
    status, _ = check(*good())
    assert status == _native.OK
    q, k, v, out = good()
    status = _native.lib().xstage_attention_forward(q.address, k.address, v.address, out.address, None, 0.0, None)
    assert status == _native.ERR_UNSUPPORTED
    assert "built without CUDA" in _native.last_error()
    info = raised(status)
    assert info.type is RuntimeError


def test_structs_match_dlpack_abi():
    assert ctypes.sizeof(_native.DLTensor) == 48
    assert _native.DLTensor.shape.offset == 24 and _native.DLTensor.byte_offset.offset == 40
    assert _native.DLTensor.dtype_code.offset == 20 and _native.DLTensor.device_id.offset == 12
