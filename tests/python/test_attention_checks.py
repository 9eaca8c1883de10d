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


# --- precision and workspace (xstage_attention_call since C API version 2) ----------------------------
FP8, BF16_P = _native.PRECISIONS["fp8"], _native.PRECISIONS["bf16"]
U8 = (_native.KDL_UINT, 8)
WS_ADDRESS = 1 << 40  # aligned, far from FAKE_ADDRESS and the tensors there: separate memory


def check_call(q, k, v, out, lse=None, scale=0.0, precision=BF16_P, workspace=None):
    """Status and message of xstage_attention_check_call."""
    call = _native.AttentionCall()
    call.q, call.k, call.v, call.out = q.address, k.address, v.address, out.address
    call.lse = None if lse is None else lse.address
    call.softmax_scale = scale
    call.precision = precision
    call.workspace = None if workspace is None else workspace.address
    status = _native.lib().xstage_attention_check_call(ctypes.addressof(call))
    return status, _native.last_error()


def workspace_bytes(q, k, precision=FP8):
    n = ctypes.c_uint64(12345)
    status = _native.lib().xstage_attention_workspace_bytes(q.address, k.address, precision, ctypes.byref(n))
    return status, n.value, _native.last_error()


def fp8_workspace(q, k, address=WS_ADDRESS, **kw):
    """A workspace descriptor of the size the library asks for (any size without the kernel's layout)."""
    status, n, _ = workspace_bytes(q, k)
    return desc((n if status == _native.OK else 1 << 20,), dtype=U8, address=address, **kw)


def test_call_struct_matches_the_c_header():
    # c_api.h states this layout; capi_attn.cpp static_asserts it on the C side.
    c = _native.AttentionCall
    assert [(name, getattr(c, name).offset) for name, _ in c._fields_] == [
        ("q", 0), ("k", 8), ("v", 16), ("out", 24), ("lse", 32), ("softmax_scale", 40), ("stream", 48),
        ("precision", 56), ("workspace", 64)]
    assert ctypes.sizeof(c) == 72
    assert _native.PRECISIONS == {"bf16": 0, "fp8": 1}  # XSTAGE_ATTN_PRECISION_BF16 / _FP8


def test_zeroed_call_fields_are_the_bf16_forward():
    q, k, v, out = good()
    assert check_call(q, k, v, out) == check(q, k, v, out) == (_native.OK, "")
    for status, message in (check_call(q, k, v, out, scale=-1.0), check(q, k, v, out, scale=-1.0)):
        assert status == _native.ERR_VALUE and "softmax_scale: -1" in message


def test_valid_fp8_call_passes_every_check():
    q, k, v, out = good()
    status, message = check_call(q, k, v, out, lse=desc((B, H, SQ), dtype=F32), precision=FP8,
                                 workspace=fp8_workspace(q, k))
    assert (status, message) == (_native.OK, "")


def test_bf16_call_takes_an_optional_workspace():
    # bf16's workspace holds a split last round's partials; these shapes (48 tiles) split nothing, so any
    # size passes, and none is the whole-tile schedule.
    q, k, v, out = good()
    assert check_call(q, k, v, out, precision=BF16_P, workspace=fp8_workspace(q, k)) == (_native.OK, "")
    assert check_call(q, k, v, out, precision=BF16_P) == (_native.OK, "")


@pytest.mark.parametrize("case, expected_status, words", [
    ("precision_2", _native.ERR_VALUE, ["precision: 2", "accepted: 0 (XSTAGE_ATTN_PRECISION_BF16), "
                                                        "1 (XSTAGE_ATTN_PRECISION_FP8)"]),
    ("precision_negative", _native.ERR_VALUE, ["precision: -1", "accepted: 0"]),
    ("fp8_head_dim_64", _native.ERR_VALUE, ["q: head_dim (dimension 3) 64", "with precision 1 "
                                            "(XSTAGE_ATTN_PRECISION_FP8); accepted: 128"]),
    ("fp8_no_workspace", _native.ERR_VALUE, ["workspace: missing (null tensor) with precision 1",
                                             "xstage_attention_workspace_bytes"]),
    ("bf16_ws_dtype", _native.ERR_TYPE, ["workspace: dtype float32; accepted: uint8"]),  # optional, same rules
    ("ws_dtype", _native.ERR_TYPE, ["workspace: dtype float32; accepted: uint8"]),
    ("ws_rank", _native.ERR_VALUE, ["workspace: rank 2 (shape [2, 1048576]); accepted: 1 ([bytes])"]),
    ("ws_cpu", _native.ERR_VALUE, ["workspace: device cpu; accepted: a CUDA device tensor"]),
    ("ws_other_gpu", _native.ERR_VALUE, ["workspace: device cuda:1 but q is on cuda:0"]),
    ("ws_strided", _native.ERR_VALUE, ["workspace: stride 2; accepted: a contiguous buffer"]),
    ("ws_misaligned", _native.ERR_VALUE, ["workspace: data address", "is 16 bytes past a 256-byte boundary",
                                          "accepted: 256-byte aligned"]),
    ("ws_overlaps_k", _native.ERR_VALUE, ["workspace: its memory overlaps k's"]),
    ("ws_overlaps_lse", _native.ERR_VALUE, ["workspace: its memory overlaps lse's"]),
    pytest.param("ws_too_small", _native.ERR_VALUE, ["workspace: 4096 bytes (shape [4096]); precision 1 "
                                                     "(XSTAGE_ATTN_PRECISION_FP8) needs", "for q [2, 1000, 3, 128] "
                                                     "and k [2, 512, 3, 128]"], marks=needs_kernel_rules),
])
def test_bad_precision_or_workspace(case, expected_status, words):
    q, k, v, out = good()
    lse, precision = None, FP8
    ws = fp8_workspace(q, k)
    if case == "precision_2":
        precision = 2
    elif case == "precision_negative":
        precision = -1
    elif case == "fp8_head_dim_64":
        q, k, v, out = (desc(s[:3] + (64,)) for s in (QS, KS, KS, QS))
    elif case == "fp8_no_workspace":
        ws = None
    elif case == "bf16_ws_dtype":
        precision = BF16_P
        ws = desc((1 << 18,), dtype=F32, address=WS_ADDRESS)
    elif case == "ws_dtype":
        ws = desc((1 << 18,), dtype=F32, address=WS_ADDRESS)
    elif case == "ws_rank":
        ws = desc((2, 1 << 20), dtype=U8, address=WS_ADDRESS)
    elif case == "ws_cpu":
        ws = fp8_workspace(q, k, device=(_native.KDL_CPU, 0))
    elif case == "ws_other_gpu":
        ws = fp8_workspace(q, k, device=(_native.KDL_CUDA, 1))
    elif case == "ws_strided":
        ws = desc((1 << 20,), dtype=U8, address=WS_ADDRESS, strides=[2])
    elif case == "ws_misaligned":
        ws = fp8_workspace(q, k, address=WS_ADDRESS + 16)
    elif case == "ws_overlaps_k":
        k = desc(KS, address=WS_ADDRESS + 4096)
    elif case == "ws_overlaps_lse":
        lse = desc((B, H, SQ), dtype=F32, address=WS_ADDRESS - 256)  # lse's end runs into the workspace
    elif case == "ws_too_small":
        ws = desc((4096,), dtype=U8, address=WS_ADDRESS)
    status, message = check_call(q, k, v, out, lse=lse, precision=precision, workspace=ws)
    assert status == expected_status, message
    for w in words:
        assert w in message, message
    info = raised(status)
    assert info.type is (TypeError if expected_status == _native.ERR_TYPE else ValueError)


def test_overlap_is_checked_to_the_byte():
    q, k, v, out = good()
    ws = fp8_workspace(q, k)
    end = WS_ADDRESS + ws.dims[0]  # one past the workspace's last byte (a multiple of 256)
    adjacent = desc(QS, address=end)
    assert check_call(adjacent, k, v, out, precision=FP8, workspace=ws) == (_native.OK, "")
    inside = desc(QS, address=end - 16)
    status, message = check_call(inside, k, v, out, precision=FP8, workspace=ws)
    assert status == _native.ERR_VALUE and "workspace: its memory overlaps q's" in message
    # out's last element ends right at the workspace's first byte: apart
    below = desc(QS, address=WS_ADDRESS - B * SQ * H * D * 2)
    assert check_call(q, k, v, below, precision=FP8, workspace=ws) == (_native.OK, "")


def test_workspace_bytes_bf16_is_zero_in_every_build():
    q, k, _, _ = good()
    assert workspace_bytes(q, k, BF16_P) == (_native.OK, 0, "")


@needs_kernel_rules
def test_fp8_workspace_bytes_depend_on_the_shapes_only():
    q, k, _, _ = good()
    status, n, message = workspace_bytes(q, k)
    assert (status, message) == (_native.OK, "")
    # the e4m3 copies of q, k and v^T (one byte per element) and their scales, in 256-byte aligned pieces
    assert n >= (B * SQ * H * D) + 2 * (B * SKV * H * D) and n % 256 == 0
    # strides and addresses do not change it; a longer key sequence needs more
    q_t = desc(QS, strides=[H * SQ * D, D, SQ * D, 1], address=FAKE_ADDRESS * 3)
    assert workspace_bytes(q_t, k)[:2] == (_native.OK, n)
    assert workspace_bytes(q, desc((B, 2 * SKV, H, D)))[1] > n


def test_fp8_workspace_bytes_without_the_kernel_says_so():
    if xstage.has_cuda():
        pytest.skip("built with CUDA")
    q, k, _, _ = good()
    status, n, message = workspace_bytes(q, k)
    assert status == _native.ERR_UNSUPPORTED and n == 0
    assert "built without CUDA" in message and "XSTAGE_ATTN_PRECISION_FP8" in message


@pytest.mark.parametrize("case, expected_status, words", [
    ("precision_3", _native.ERR_VALUE, "precision: 3; accepted: 0 (XSTAGE_ATTN_PRECISION_BF16)"),
    ("fp8_head_dim_64", _native.ERR_VALUE, "k: head_dim (dimension 3) 64 (shape [2, 512, 3, 64]) with precision 1"),
    ("k_dtype", _native.ERR_TYPE, "k: dtype float32; accepted: bfloat16"),
    ("k_other_gpu", _native.ERR_VALUE, "k: device cuda:1 but q is on cuda:0"),
    pytest.param("heads", _native.ERR_VALUE, "k heads (dimension 2) 4 differs from q's 3", marks=needs_kernel_rules),
    pytest.param("batch", _native.ERR_VALUE, "k batch (dimension 0) 1 differs from q's 2", marks=needs_kernel_rules),
])
def test_workspace_bytes_bad_input(case, expected_status, words):
    q, k = desc(QS), desc(KS)
    precision = FP8
    if case == "precision_3":
        precision = 3
    elif case == "fp8_head_dim_64":
        q, k = desc((B, SQ, H, 128)), desc((B, SKV, H, 64))
    elif case == "k_dtype":
        k = desc(KS, dtype=F32)
    elif case == "k_other_gpu":
        k = desc(KS, device=(_native.KDL_CUDA, 1))
    elif case == "heads":
        k = desc((B, SKV, 4, D))
    elif case == "batch":
        k = desc((1, SKV, H, D))
    status, n, message = workspace_bytes(q, k, precision)
    assert status == expected_status and n == 0, message
    assert words in message, message


def test_null_pointers_are_value_errors():
    lib = _native.lib()
    assert lib.xstage_attention_forward_call(None) == _native.ERR_VALUE
    assert "call: null pointer" in _native.last_error()
    assert lib.xstage_attention_check_call(None) == _native.ERR_VALUE
    assert "xstage_attention_check_call: call: null pointer" in _native.last_error()
    q, k, _, _ = good()
    assert lib.xstage_attention_workspace_bytes(q.address, k.address, FP8, None) == _native.ERR_VALUE
    assert "bytes: null pointer" in _native.last_error()


def test_without_cuda_an_fp8_call_is_checked_then_unsupported():
    if xstage.has_cuda():
        pytest.skip("built with CUDA")
    q, k, v, out = good()
    call = _native.AttentionCall()
    call.q, call.k, call.v, call.out = q.address, k.address, v.address, out.address
    call.precision = FP8
    assert _native.lib().xstage_attention_forward_call(ctypes.addressof(call)) == _native.ERR_VALUE  # no workspace
    assert "workspace: missing" in _native.last_error()
    ws = fp8_workspace(q, k)  # kept alive: the call struct holds its address only
    call.workspace = ws.address
    assert _native.lib().xstage_attention_forward_call(ctypes.addressof(call)) == _native.ERR_UNSUPPORTED
    assert "built without CUDA" in _native.last_error()


@pytest.mark.parametrize("precision, exc, words", [
    ("fp4", ValueError, "precision 'fp4'; accepted: 'bf16', 'fp8'"),
    ("FP8", ValueError, "precision 'FP8'; accepted: 'bf16', 'fp8'"),
    (1, TypeError, "precision is a int; accepted: a str ('bf16', 'fp8')"),
    (None, TypeError, "precision is a NoneType"),
])
def test_dlpack_bad_precision(precision, exc, words):
    a = np.zeros((B, 64, H, D), dtype=np.float32)
    with pytest.raises(exc, match="xstage.attention_dlpack: " + words.replace("(", r"\(").replace(")", r"\)")):
        xstage.attention_dlpack(a, a, a, a, precision=precision)
    with pytest.raises(exc, match="xstage.attention_workspace_bytes: " + words.replace("(", r"\(").replace(")", r"\)")):
        xstage.attention_workspace_bytes(a, a, precision)


def test_dlpack_fp8_needs_a_workspace_and_bf16_takes_one_optionally():
    a = np.zeros((B, 64, H, D), dtype=np.float32)
    with pytest.raises(ValueError, match=r"precision 'fp8' needs workspace: a 1-D uint8 CUDA tensor of "
                                         r"xstage.attention_workspace_bytes\(q, k, 'fp8'\) bytes"):
        xstage.attention_dlpack(a, a, a, a, precision="fp8")
    with pytest.raises(ValueError, match=r"xstage.attention_dlpack: q: device cpu"):  # bf16 + workspace: checked
        xstage.attention_dlpack(a, a, a, a, workspace=np.zeros(16, dtype=np.uint8))
    # the library's own checks come next: numpy arrays live on the CPU
    with pytest.raises(ValueError, match=r"xstage.attention_dlpack: q: device cpu"):
        xstage.attention_dlpack(a, a, a, a, precision="fp8", workspace=np.zeros(16, dtype=np.uint8))
    with pytest.raises(ValueError, match=r"xstage.attention_workspace_bytes: q: device cpu"):
        xstage.attention_workspace_bytes(a, a)


@pytest.mark.parametrize("precision, exc, words", [
    ("fp4", ValueError, "xstage.attention: precision 'fp4'; accepted: 'bf16', 'fp8'"),
    (8, TypeError, "xstage.attention: precision is a int; accepted: a str"),
])
def test_torch_bad_precision(precision, exc, words):
    torch = pytest.importorskip("torch")
    q = torch.zeros((B, 64, H, D), dtype=torch.bfloat16)
    with pytest.raises(exc, match=words):
        xstage.attention(q, q, q, precision=precision)
    if isinstance(precision, str):  # the op's schema takes a str: the op itself refuses the value
        with pytest.raises(exc, match=words):
            torch.ops.xstage.attention(q, q, q, 0.0, False, precision)


def test_torch_fp8_on_cpu_tensors_names_the_device():
    torch = pytest.importorskip("torch")
    q = torch.zeros((B, 64, H, D), dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"xstage.attention: q: device cpu; accepted: a CUDA device tensor"):
        xstage.attention(q, q, q, precision="fp8")
    with pytest.raises(ValueError, match=r"xstage.attention: q: device cpu"):
        torch.ops.xstage.attention(q, q, q, 0.0, False, "fp8")


def test_op_schema_takes_precision():
    torch = pytest.importorskip("torch")
    xstage.attention  # noqa: B018 - registers the op
    schema = str(torch.ops.xstage.attention.default._schema)
    assert 'str precision="bf16"' in schema, schema


def fake_cuda_mode():
    """torch's FakeTensorMode and whether it makes CUDA tensors here (no GPU needed); skips otherwise."""
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode()
    try:
        with mode:
            torch.empty(1, device="cuda")
    except Exception as e:  # a torch built without CUDA
        pytest.skip(f"fake CUDA tensors unavailable: {e}")
    return torch, mode


def test_fake_kernel_checks_precision_at_trace_time():
    torch, mode = fake_cuda_mode()
    xstage.attention  # noqa: B018 - registers the op
    with mode:
        q = torch.empty((B, 100, H, 128), dtype=torch.bfloat16, device="cuda")
        k = torch.empty((B, 77, H, 128), dtype=torch.bfloat16, device="cuda")
        out, lse = torch.ops.xstage.attention(q, k, k, 0.0, True, "fp8")
        assert out.shape == q.shape and out.dtype == torch.bfloat16 and lse.shape == (B, H, 100)
        q64 = torch.empty((B, 100, H, 64), dtype=torch.bfloat16, device="cuda")
        with pytest.raises(ValueError, match=r"xstage.attention: q: head_dim \(dimension 3\) 64 \(shape \[2, 100, 3, "
                                             r"64\]\) with precision 1 \(XSTAGE_ATTN_PRECISION_FP8\); accepted: 128"):
            torch.ops.xstage.attention(q64, q64, q64, 0.0, False, "fp8")
        torch.ops.xstage.attention(q64, q64, q64, 0.0, False, "bf16")  # the same tensors are fine in bf16
        with pytest.raises(ValueError, match=r"xstage.attention: precision 'fp4'; accepted: 'bf16', 'fp8'"):
            torch.ops.xstage.attention(q, k, k, 0.0, False, "fp4")


def test_traced_graph_carries_the_precision():
    # Traced (non-eager) calls go through the custom op with precision as a constant argument.
    torch, mode = fake_cuda_mode()
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(q, k, v):
        return xstage.attention(q, k, v, precision="fp8", return_lse=True)

    with mode:
        q = torch.empty((B, 100, H, 128), dtype=torch.bfloat16, device="cuda")
        k = torch.empty((B, 77, H, 128), dtype=torch.bfloat16, device="cuda")
        graph = make_fx(f)(q, k, k.clone())
    calls = [n for n in graph.graph.nodes if n.op == "call_function" and "xstage.attention" in str(n.target)]
    assert len(calls) == 1 and calls[0].args[3:] == (0.0, True, "fp8")
