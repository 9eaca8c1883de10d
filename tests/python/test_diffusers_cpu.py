"""xstage.integrations.diffusers on CPU tensors: routing decisions and their counters, fallback outputs equal to the
model without xstage, enable/disable round trips, the version check and the documented example. A CPU attention
(an AttentionKernel on float32 CPU tensors) stands in for the CUDA kernel where a test needs calls to be taken."""
import inspect
import pathlib
import re

import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

import xstage.integrations.diffusers as xd  # noqa: E402
from diffusers.models import attention_dispatch  # noqa: E402
from xstage.integrations import _diffusers_backend as xdb  # noqa: E402 - the implementation's private parts

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def keep_active_backend():
    """set_attention_backend also sets diffusers' process-wide active backend: restore it after each test."""
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry
    saved = _AttentionBackendRegistry._active_backend
    yield
    _AttentionBackendRegistry._active_backend = saved
    for backend in xdb._BACKENDS.values():
        backend.configure()


def sdpa_cpu(query, key, value, scale):
    """[B, S, H, D] attention computed apart from diffusers' backends (explicit softmax)."""
    q, k, v = (t.transpose(1, 2).double() for t in (query, key, value))
    s = q @ k.transpose(-1, -2) * (scale if scale is not None else q.shape[-1] ** -0.5)
    return (s.softmax(-1) @ v).transpose(1, 2).to(query.dtype)


def cpu_kernel(calls=None, head_dims=(16, 32)):
    def fn(q, k, v, scale):
        if calls is not None:
            calls.append((tuple(q.shape), tuple(k.shape), scale))
        return sdpa_cpu(q, k, v, scale)
    return xd.AttentionKernel("cpu_reference", fn, "cpu", (torch.float32,), head_dims)


def tiny_wan(num_layers=2):
    torch.manual_seed(0)
    from diffusers import WanTransformer3DModel
    model = WanTransformer3DModel(num_layers=num_layers, num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                  out_channels=4, text_dim=32, freq_dim=32, ffn_dim=64, rope_max_seq_len=64)
    return model.eval()


def wan_inputs():
    g = torch.Generator().manual_seed(1)
    return (torch.randn(1, 4, 2, 8, 8, generator=g), torch.tensor([300]), torch.randn(1, 24, 32, generator=g))


def run(model, inputs):
    with torch.no_grad():
        return model(*inputs).sample


def backends(model):
    return [vars(m.processor).get("_attention_backend", "<class default>") for m in model.modules()
            if hasattr(getattr(m, "processor", None), "_attention_backend")]


def test_wan_cpu_falls_back_everywhere_with_equal_output():
    model, inputs = tiny_wan(), wan_inputs()
    before, ref = backends(model), run(model, inputs)
    xd.enable(model)   # xstage's kernel: CUDA only, so every call goes to the previous backend
    try:
        out = run(model, inputs)
        s = xd.stats(model)
    finally:
        xd.disable(model)
    assert torch.equal(out, ref)
    assert s["kernel"] == "xstage" and s["routed"] == 0
    assert s["fallback"] == {"device": 4}   # 2 blocks x (self + cross)
    shapes = sorted(tuple(r["shape"]) for r in s["fallback_by_shape"])
    assert shapes == [(1, 32, 24, 2, 16), (1, 32, 32, 2, 16)]
    assert backends(model) == before and torch.equal(run(model, inputs), ref)
    assert attention_dispatch.dispatch_attention_fn is diffusers.models.transformers.transformer_wan.dispatch_attention_fn


def test_wan_calls_go_to_the_kernel_that_takes_them():
    model, inputs = tiny_wan(), wan_inputs()
    ref = run(model, inputs)
    calls = []
    with xd.enabled(model, kernel=cpu_kernel(calls), strict=True):
        out = run(model, inputs)
        s = xd.stats(model)
    assert s["routed"] == 4 and s["fallback_total"] == 0 and len(calls) == 4
    assert {c[1][1] for c in calls} == {32, 24}   # self-attention (32 video tokens) and cross-attention (24 text)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


def test_head_dim_and_autograd_fall_back_with_their_reason():
    model, inputs = tiny_wan(1), wan_inputs()
    with xd.enabled(model, kernel=cpu_kernel(head_dims=(64, 128))):
        run(model, inputs)
        assert xd.stats(model)["fallback"] == {"head_dim": 2}
    with xd.enabled(model, kernel=cpu_kernel()):
        model(*inputs)   # parameters require grad: the kernel has no backward
        assert xd.stats(model)["fallback"] == {"autograd": 2}
        xd.reset_stats(model)
        assert xd.stats(model)["fallback_total"] == 0


def test_strict_raises_on_a_call_the_kernel_does_not_take():
    model, inputs = tiny_wan(1), wan_inputs()
    with xd.enabled(model, strict=True):
        with pytest.raises(RuntimeError, match="device"):
            run(model, inputs)


def test_flux_joint_attention_routed():
    from diffusers import FluxTransformer2DModel
    torch.manual_seed(0)
    model = FluxTransformer2DModel(patch_size=1, in_channels=8, num_layers=1, num_single_layers=1,
                                   attention_head_dim=16, num_attention_heads=2, joint_attention_dim=24,
                                   pooled_projection_dim=12, axes_dims_rope=(4, 6, 6)).eval()
    g = torch.Generator().manual_seed(2)
    kw = dict(hidden_states=torch.randn(1, 16, 8, generator=g), encoder_hidden_states=torch.randn(1, 6, 24, generator=g),
              pooled_projections=torch.randn(1, 12, generator=g), timestep=torch.tensor([0.5]),
              img_ids=torch.randn(16, 3, generator=g), txt_ids=torch.zeros(6, 3))
    with torch.no_grad():
        ref = model(**kw).sample
        with xd.enabled(model, kernel=cpu_kernel(), strict=True):
            out = model(**kw).sample
            s = xd.stats(model)
    assert s["routed"] == 2 and [r["shape"] for r in s["routed_by_shape"]] == [[1, 22, 22, 2, 16]]
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


def hunyuan_video():
    from diffusers import HunyuanVideoTransformer3DModel
    torch.manual_seed(0)
    model = HunyuanVideoTransformer3DModel(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                                           num_layers=1, num_single_layers=1, num_refiner_layers=1, patch_size=2,
                                           patch_size_t=1, text_embed_dim=24, pooled_projection_dim=12,
                                           rope_axes_dim=(4, 6, 6)).eval()
    g = torch.Generator().manual_seed(3)
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[0, 5:] = 0   # batch 0 has 5 text tokens, batch 1 all 7: two prefix lengths
    kw = dict(hidden_states=torch.randn(2, 4, 2, 8, 8, generator=g), timestep=torch.tensor([300, 300]),
              encoder_hidden_states=torch.randn(2, 7, 24, generator=g), encoder_attention_mask=mask,
              pooled_projections=torch.randn(2, 12, generator=g), guidance=torch.tensor([3.0, 3.0]) * 1000)
    return model, kw


def test_hunyuan_video_key_padding_mask_taken_as_prefix():
    model, kw = hunyuan_video()
    with torch.no_grad():
        ref = model(**kw).sample
        with xd.enabled(model, kernel=cpu_kernel()):
            out = model(**kw).sample
            s = xd.stats(model)
        with xd.enabled(model, kernel=cpu_kernel(), key_padding_masks=False):
            model(**kw)
            s_off = xd.stats(model)
    assert s["routed"] == 2 and s["routed_with_mask"] == 2 and s["fallback_total"] == 0
    assert s["not_routable_processors"] == {"AttnProcessor2_0": 1}   # the token refiner calls SDPA itself
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    assert s_off["routed"] == 0 and s_off["fallback"] == {"attn_mask": 2}


def test_hunyuan_video_routed_under_inference_mode():
    """Pipelines may run under torch.inference_mode(): the padding mask is then an inference tensor, which has
    no version counter."""
    model, kw = hunyuan_video()
    with torch.inference_mode():
        ref = model(**kw).sample
        with xd.enabled(model, kernel=cpu_kernel()):
            out = model(**kw).sample
            s = xd.stats(model)
    assert s["routed"] == 2 and s["routed_with_mask"] == 2 and s["fallback_total"] == 0
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


def test_mask_cache_sees_in_place_changes_of_inference_masks():
    cache = xdb._MaskCache()
    with torch.inference_mode():
        mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
        mask[0, ..., 4:] = False
        assert cache.lengths(mask, 2, 6) == [4, 6]
        mask[1, ..., 3:] = False   # allowed in place inside inference mode, with no version to see it by
        assert cache.lengths(mask, 2, 6) == [4, 3]
        mask[1, ..., 1] = False    # a hole: no longer a prefix
        assert cache.lengths(mask, 2, 6) is None
    normal = torch.ones(1, 1, 1, 6, dtype=torch.bool)
    assert cache.lengths(normal, 3, 6) == [6, 6, 6]
    normal[..., 2:] = False        # a normal tensor's version moves: the cached entry is not reused
    assert cache.lengths(normal, 3, 6) == [2, 2, 2]


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, query, key, value, **kw):
        self.calls.append(kw)
        return "previous"


def routed_call(kernel=None, **call_kw):
    """One call of a registered backend's function with a recording fallback; returns (result, stats, fallback
    kwargs)."""
    inner = Recorder()
    backend = xdb._Backend(kernel or cpu_kernel())
    accepted = set(inspect.signature(attention_dispatch._native_attention).parameters)
    q = call_kw.pop("query", torch.randn(1, 8, 2, 16))
    k = call_kw.pop("key", torch.randn(1, 6, 2, 16))
    v = call_kw.pop("value", torch.randn(*k.shape))
    original = xdb._fallback_target
    xdb._fallback_target = lambda b: ("PREV", inner, accepted)
    try:
        out = xdb._call_backend(backend, dict(query=q, key=k, value=v, **call_kw))
    finally:
        xdb._fallback_target = original
    return out, backend.stats.as_dict([]), inner.calls


@pytest.mark.parametrize("kw,reason", [
    (dict(is_causal=True), "causal"),
    (dict(dropout_p=0.1), "dropout"),
    (dict(_parallel_config=object()), "context_parallel"),
    (dict(return_lse=True), "attention_kwargs"),
    (dict(enable_gqa=True), "gqa"),
    (dict(key=torch.randn(1, 6, 1, 16)), "gqa"),
    (dict(query=torch.randn(1, 8, 2, 16, dtype=torch.float64)), "dtype"),
    (dict(value=torch.randn(1, 6, 2, 32)), "shape"),
    (dict(query=torch.randn(8, 2, 16)), "shape"),
    (dict(attn_mask=torch.ones(8, 6, dtype=torch.bool)), "attn_mask"),
    (dict(attn_mask=torch.zeros(1, 1, 1, 6)), "attn_mask"),                                 # additive
    (dict(attn_mask=torch.tensor([True, False, True, True, True, True]).view(1, 1, 1, 6)), "attn_mask"),  # holes
    (dict(attn_mask=torch.zeros(1, 1, 1, 6, dtype=torch.bool)), "attn_mask"),               # no key at all
])
def test_each_fallback_reason_is_counted_and_passes_the_call_on_unchanged(kw, reason):
    passed = {k: v for k, v in kw.items() if k not in ("query", "key", "value")}
    out, s, calls = routed_call(**kw)
    assert out == "previous" and s["fallback"] == {reason: 1} and s["routed"] == 0
    assert reason in xd.FALLBACK_REASONS
    for name, value in passed.items():
        assert calls[0][name] is value


def test_prefix_mask_matches_masked_reference():
    q, k, v = torch.randn(2, 8, 2, 16), torch.randn(2, 6, 2, 16), torch.randn(2, 6, 2, 16)
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[0, ..., 4:] = False
    out, s, calls = routed_call(query=q, key=k, value=v, attn_mask=mask)
    assert calls == [] and s["routed"] == 1 and s["routed_with_mask"] == 1
    ref = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), attn_mask=mask)
    torch.testing.assert_close(out, ref.transpose(1, 2), rtol=1e-5, atol=1e-6)


def test_kernel_rejection_falls_back_with_its_message():
    def reject(q, k, v, scale):
        raise ValueError("xstage.attention: query must be contiguous")
    out, s, calls = routed_call(xd.AttentionKernel("r", reject, "cpu", (torch.float32,), (16,)),
                                query=torch.randn(1, 4, 2, 16), key=torch.randn(1, 4, 2, 16))
    assert out == "previous" and s["fallback"] == {"kernel_rejected": 1} and "contiguous" in s["last_kernel_rejection"]


def test_xstage_refusing_a_call_sends_it_to_the_fallback():
    """xstage's own kernel function, offered CPU tensors as if it took them: it raises ValueError before any
    launch, and the call goes on to the fallback, counted with the message."""
    import dataclasses
    try:
        import xstage
        xstage.attention
    except Exception as e:   # the native library is not built here
        pytest.skip(f"xstage.attention unavailable: {e}")
    kernel = dataclasses.replace(xd.xstage_kernel(), device_type="cpu")
    q = torch.randn(1, 8, 2, 64, dtype=torch.bfloat16)
    out, s, calls = routed_call(kernel, query=q, key=q, value=q)
    assert out == "previous" and s["fallback"] == {"kernel_rejected": 1} and len(calls) == 1
    assert "xstage.attention" in s["last_kernel_rejection"]


# --- diffusers' own switches: set_attention_backend, attention_backend, dispatch_attention_fn ----------------
def test_xstage_is_a_registered_diffusers_backend():
    from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry
    assert {"xstage", "xstage_fp8"} <= set(xd.backend_names())
    assert AttentionBackendName("xstage").value == "xstage" and AttentionBackendName.XSTAGE.value == "xstage"
    assert "xstage" in {m.value for m in AttentionBackendName.__members__.values()}
    assert AttentionBackendName.XSTAGE in _AttentionBackendRegistry._backends
    assert _AttentionBackendRegistry._is_context_parallel_available(AttentionBackendName.XSTAGE)
    assert not _AttentionBackendRegistry._is_context_parallel_available(AttentionBackendName.XSTAGE_FP8)
    # every argument diffusers gives its native backend reaches ours
    assert (_AttentionBackendRegistry._supported_arg_names[AttentionBackendName.XSTAGE] ==
            _AttentionBackendRegistry._supported_arg_names[AttentionBackendName.NATIVE])
    assert xd.register() == "xstage" and xd.backend_names().count("xstage") == 1   # idempotent


def test_set_attention_backend_xstage_runs_the_backend():
    model, inputs = tiny_wan(1), wan_inputs()
    ref = run(model, inputs)
    xd.reset_stats()
    model.set_attention_backend("xstage")
    assert xd.is_enabled(model) and set(backends(model)) == {attention_dispatch.AttentionBackendName.XSTAGE}
    out = run(model, inputs)   # CPU tensors: every call goes to the fallback (native)
    s = xd.stats(model)
    assert torch.equal(out, ref) and s["kernel"] == "xstage" and s["fallback"] == {"device": 2}
    model.set_attention_backend("native")
    assert not xd.is_enabled(model)
    with pytest.raises(ValueError, match="not enabled"):
        xd.stats(model)


def test_attention_backend_context_manager_runs_the_backend():
    from diffusers.models.attention_dispatch import attention_backend
    model, inputs = tiny_wan(1), wan_inputs()
    model.reset_attention_backend()
    xd.reset_stats()
    assert not xd.is_enabled(model)
    with attention_backend("xstage"):
        assert xd.is_enabled(model)
        run(model, inputs)
    assert not xd.is_enabled(model)
    assert xd.stats()["fallback"] == {"device": 2}


def test_dispatch_attention_fn_with_a_custom_kernel_backend():
    calls = []
    name = xd.register(cpu_kernel(calls))
    q, k = torch.randn(1, 8, 2, 16), torch.randn(1, 6, 2, 16)
    out = attention_dispatch.dispatch_attention_fn(q, k, k, backend=name)
    assert len(calls) == 1
    torch.testing.assert_close(out, sdpa_cpu(q, k, k, None))


def test_set_attention_backend_after_enable_leaves_a_consistent_state():
    """enable, then diffusers' switch: the model runs on the backend set last, and is_enabled says so."""
    model, inputs = tiny_wan(1), wan_inputs()
    calls = []
    xd.enable(model, kernel=cpu_kernel(calls))
    assert xd.is_enabled(model)
    run(model, inputs)
    assert len(calls) == 2
    model.set_attention_backend("_native_math")
    assert not xd.is_enabled(model)
    run(model, inputs)
    assert len(calls) == 2   # no call reached the kernel after the switch
    xd.disable(model)        # enable's record is dropped; the backend set last stays
    assert set(backends(model)) == {attention_dispatch.AttentionBackendName._NATIVE_MATH}
    model.reset_attention_backend()


def test_enable_after_set_attention_backend_keeps_it_as_fallback():
    """diffusers' switch, then enable: xstage runs, the backend set before is the fallback, disable returns to it."""
    from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry
    model, inputs = tiny_wan(1), wan_inputs()
    model.set_attention_backend("_native_math")
    active = _AttentionBackendRegistry._active_backend   # set_attention_backend sets it too from 0.37 on
    ref = run(model, inputs)
    xd.enable(model, kernel=cpu_kernel(head_dims=(64,)))   # head dim 16: every call falls back
    assert xd.is_enabled(model)
    out = run(model, inputs)
    assert torch.equal(out, ref) and xd.stats(model)["fallback"] == {"head_dim": 2}
    assert xdb._BACKENDS["cpu_reference"].fallback is AttentionBackendName._NATIVE_MATH
    xd.disable(model)
    assert not xd.is_enabled(model)
    assert set(backends(model)) == {AttentionBackendName._NATIVE_MATH}
    assert _AttentionBackendRegistry._active_backend is active
    model.set_attention_backend("xstage")   # switched on by diffusers alone: disable takes it off
    assert xd.is_enabled(model)
    xd.disable(model)
    assert not xd.is_enabled(model) and backends(model) == ["<class default>"] * 2
    model.reset_attention_backend()


def test_enable_disable_round_trip_and_errors():
    from diffusers.models.attention_dispatch import AttentionBackendName
    model = tiny_wan(1)
    procs = [m.processor for m in model.modules() if hasattr(getattr(m, "processor", None), "_attention_backend")]
    procs[0]._attention_backend = AttentionBackendName._NATIVE_MATH   # one processor with its own backend
    xd.enable(model, kernel=cpu_kernel())
    assert xd.is_enabled(model)
    assert all(p._attention_backend.value == "cpu_reference" for p in procs)
    with pytest.raises(ValueError, match="already runs on the xstage backend 'cpu_reference'"):
        xd.enable(model)
    xd.disable(model)
    assert not xd.is_enabled(model)
    assert procs[0]._attention_backend is AttentionBackendName._NATIVE_MATH
    assert "_attention_backend" not in vars(procs[1]) and procs[1]._attention_backend is None
    with pytest.raises(ValueError, match="not enabled"):
        xd.disable(model)
    with pytest.raises(ValueError, match="not enabled"):
        xd.stats(model)
    with pytest.raises(ValueError, match="fallback 'not_a_backend'; accepted: a diffusers attention backend name"):
        xd.enable(model, fallback="not_a_backend")
    with pytest.raises(ValueError, match="fallback 'xstage' is an xstage backend"):
        xd.enable(model, fallback="xstage")
    assert not xd.is_enabled(model)


def test_explicit_fallback_backend():
    model, inputs = tiny_wan(1), wan_inputs()
    ref = run(model, inputs)
    with xd.enabled(model, fallback="_native_math"):
        out = run(model, inputs)
        assert xd.stats(model)["fallback"] == {"device": 2}
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    assert xdb._BACKENDS["xstage"].fallback is None   # disable restores the default configuration


def test_a_model_without_routable_processors_is_refused():
    class Plain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="no attention processor"):
        xd.enable(Plain())
    with pytest.raises(TypeError, match="torch.nn.Module"):
        xd.enable(object())


def test_a_diffusers_name_cannot_be_taken():
    with pytest.raises(ValueError, match="kernel.name 'flash' is diffusers' own backend"):
        xd.register(xd.AttentionKernel("flash", sdpa_cpu, "cpu", (torch.float32,)))
    with pytest.raises(ValueError, match="kernel.name 'My Kernel'; accepted: a lower-case identifier"):
        xd.register(xd.AttentionKernel("My Kernel", sdpa_cpu, "cpu", (torch.float32,)))
    with pytest.raises(TypeError, match="kernel is a str"):
        xd.register("xstage")


def test_version_check(monkeypatch):
    assert xd.check_diffusers_version() == diffusers.__version__
    assert diffusers.__version__ in xd.TESTED_DIFFUSERS_VERSIONS   # the suite runs on a tested release
    monkeypatch.setattr(diffusers, "__version__", "0.43.0")
    monkeypatch.delenv(xd.ALLOW_UNTESTED_ENV, raising=False)
    with pytest.raises(RuntimeError, match=r"supports diffusers >=0\.36,<0\.43 \(tested: 0\.36\.0, 0\.42\.1\), "
                                           r"found diffusers 0\.43\.0"):
        xd.enable(tiny_wan(1))
    for inside in ("0.36.0", "0.39.1", "0.42.3.dev0"):
        monkeypatch.setattr(diffusers, "__version__", inside)
        assert xd.check_diffusers_version() == inside
    monkeypatch.setattr(diffusers, "__version__", "0.35.2")
    with pytest.raises(RuntimeError, match="found diffusers 0.35.2"):
        xd.check_diffusers_version()
    with pytest.warns(RuntimeWarning, match="untested"):
        assert xd.check_diffusers_version(allow_untested=True) == "0.35.2"
    monkeypatch.setenv(xd.ALLOW_UNTESTED_ENV, "1")
    with pytest.warns(RuntimeWarning):
        xd.check_diffusers_version()
    monkeypatch.delattr(attention_dispatch._AttentionBackendRegistry, "_supported_arg_names")
    with pytest.raises(RuntimeError, match="lacks _AttentionBackendRegistry._supported_arg_names"), \
            pytest.warns(RuntimeWarning):
        xd.check_diffusers_version()


def test_missing_diffusers_is_named(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "diffusers", None)   # import diffusers raises ImportError
    with pytest.raises(ImportError, match=r"needs diffusers \(>=0\.36,<0\.43\).*pip install 'xstage\[diffusers\]'"):
        xd.check_diffusers_version()


def test_documented_example_runs():
    text = (REPO / "docs" / "python_diffusers.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert len(code.strip().splitlines()) <= 15
    ns = {}
    exec(compile(code, "docs/python_diffusers.md", "exec"), ns)
    if torch.cuda.is_available():
        assert ns["counts"]["routed"] == 4 and ns["counts"]["fallback"] == {}
    else:
        assert ns["counts"]["routed"] == 0 and ns["counts"]["fallback"] == {"device": 4}


def test_torch_compile_fullgraph_traces_the_backend():
    """Dynamo traces diffusers' dispatch into the registered backend, the kernel and the counters without a graph
    break (backend="eager": tracing only, no code generation), and the compiled model follows enable/disable."""
    model, inputs = tiny_wan(), wan_inputs()
    ref = run(model, inputs)
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    calls = []
    with xd.enabled(model, kernel=cpu_kernel(calls)):
        for _ in range(2):
            torch.testing.assert_close(run(compiled, inputs), ref, rtol=1e-4, atol=1e-5)
        assert xd.stats(model)["routed"] == 8 and len(calls) == 8
    torch.testing.assert_close(run(compiled, inputs), ref, rtol=0, atol=0)
    assert len(calls) == 8


def test_a_copy_of_an_enabled_model_keeps_the_backend():
    import copy
    model, inputs = tiny_wan(1), wan_inputs()
    with xd.enabled(model, kernel=cpu_kernel()):
        clone = copy.deepcopy(model)
    assert xd.is_enabled(clone)   # like any backend set with set_attention_backend
    torch.testing.assert_close(run(clone, inputs), run(model, inputs), rtol=1e-4, atol=1e-5)
    xd.disable(clone)
    assert not xd.is_enabled(clone)


# --- precision="fp8": xstage's FP8 kernel ----------------------------------------------------------------
def test_xstage_fp8_kernel_takes_head_dim_128_and_has_no_ulysses_step():
    k8, k16 = xd.xstage_kernel("fp8"), xd.xstage_kernel()
    assert (k8.name, k8.head_dims, k8.ulysses, k8.dtypes) == ("xstage_fp8", (128,), None, (torch.bfloat16,))
    assert (k16.name, k16.head_dims, k16.ulysses is not None) == ("xstage", (64, 128), True)


@pytest.mark.parametrize("head_dim, reason", [(64, "head_dim"), (16, "head_dim"), (128, "kernel_rejected")])
def test_fp8_falls_back_on_head_dims_other_than_128(head_dim, reason):
    """xstage's FP8 kernel offered CPU tensors as if it took them: head dims other than 128 fall back with reason
    head_dim before the kernel is called; 128 reaches the kernel, which refuses CPU tensors before any launch."""
    import dataclasses
    if reason == "kernel_rejected":
        try:
            import xstage
            xstage.attention
        except Exception as e:   # the native library is not built here
            pytest.skip(f"xstage.attention unavailable: {e}")
    kernel = dataclasses.replace(xd.xstage_kernel("fp8"), device_type="cpu")
    q = torch.randn(1, 8, 2, head_dim, dtype=torch.bfloat16)
    out, s, calls = routed_call(kernel, query=q, key=q, value=q)
    assert out == "previous" and s["fallback"] == {reason: 1} and len(calls) == 1 and s["kernel"] == "xstage_fp8"
    if reason == "kernel_rejected":
        assert "xstage.attention: q: device cpu" in s["last_kernel_rejection"]


def test_fp8_context_parallel_calls_fall_back():
    kernel = xd.xstage_kernel("fp8")
    q = torch.randn(1, 8, 2, 128, dtype=torch.bfloat16)
    assert xdb._ulysses_plan(kernel, object(), q, q)[0] == "context_parallel"
    out, s, _ = routed_call(kernel, query=q, key=q, value=q, _parallel_config=object())
    assert out == "previous" and s["fallback"] == {"context_parallel": 1}


def test_enable_with_precision_fp8_routes_to_the_fp8_kernel():
    model, inputs = tiny_wan(1), wan_inputs()
    ref = run(model, inputs)
    with xd.enabled(model, precision="fp8"):   # CPU tensors: every call falls back, counted for xstage_fp8
        out = run(model, inputs)
        s = xd.stats(model)
    assert torch.equal(out, ref)
    assert s["kernel"] == "xstage_fp8" and s["routed"] == 0 and s["fallback"] == {"device": 2}


@pytest.mark.parametrize("kwargs, exc, words", [
    (dict(precision="fp4"), ValueError, "xstage.integrations.diffusers.enable: precision 'fp4'; accepted: 'bf16', "
                                        "'fp8'"),
    (dict(precision=8), TypeError, "xstage.integrations.diffusers.enable: precision is a int; accepted: a str"),
    (dict(precision="fp8", kernel="cpu"), ValueError, "precision 'fp8' with kernel 'cpu_reference': precision picks "
                                                      "xstage's own kernel"),
])
def test_enable_refuses_bad_precision(kwargs, exc, words):
    model = tiny_wan(1)
    if kwargs.get("kernel") == "cpu":
        kwargs["kernel"] = cpu_kernel()
    with pytest.raises(exc, match=re.escape(words)):
        xd.enable(model, **kwargs)
    assert not xd.is_enabled(model)
    with pytest.raises(ValueError, match=re.escape("xstage.integrations.diffusers.xstage_kernel: precision 'e5m2'")):
        xd.xstage_kernel("e5m2")
