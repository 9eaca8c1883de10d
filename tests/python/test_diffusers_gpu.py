"""xstage attention inside diffusers transformers on a Hopper GPU: Wan2.1-14B, Flux and HunyuanVideo blocks (real head
counts and head dims, fewer blocks, random weights, few tokens), bf16.

Tolerance: each model runs three times on the same weights and inputs: in float32 with diffusers' native SDPA
backend (the reference), in bf16 with the native SDPA backend, and in bf16 with xstage. xstage's max and mean
absolute errors against the reference must be at most MAX_RATIO and MEAN_RATIO times native bf16's (both runs
round the same bf16 linear layers, so the attention kernel is the only difference). Every attention call that
dispatch_attention_fn sees must go to xstage (strict=True raises on any fallback), and the counters say which."""
import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs a Hopper GPU (sm_90)", allow_module_level=True)
xstage = pytest.importorskip("xstage")
if not hasattr(xstage, "attention"):
    pytest.skip("xstage is not installed (no xstage.attention)", allow_module_level=True)

import torch.nn.attention  # noqa: E402
import xstage.integrations.diffusers as xd  # noqa: E402

MAX_RATIO, MEAN_RATIO = 2.0, 1.2


def build(cls, **config):
    torch.manual_seed(0)
    with torch.device("cuda"):
        return cls(**config).eval()


def errors(out, ref):
    d = (out.float() - ref.float()).abs()
    return d.max().item(), d.mean().item()


def compare(name, model32, inputs32):
    """Runs the three variants; returns the xstage run's stats. Asserts finiteness and the tolerance above."""
    model16 = copy.deepcopy(model32).to(torch.bfloat16)
    inputs16 = {k: v.to(torch.bfloat16) if torch.is_floating_point(v) else v for k, v in inputs32.items()}
    with torch.inference_mode():
        ref = model32(**inputs32).sample
        native = model16(**inputs16).sample
        with xd.enabled(model16, strict=True):
            ours = model16(**inputs16).sample
            s = xd.stats(model16)
    max_d, mean_d = errors(ours, native)
    assert_within_rule(name, ours, native, ref, f"|xstage - native bf16| max {max_d:.3e} mean {mean_d:.3e}; "
                                                f"routed {s['routed']}")
    return s


def assert_within_rule(name, ours, native, ref, note):
    """The tolerance above: xstage's errors against the fp32 reference at most MAX_RATIO (max) and MEAN_RATIO
    (mean) times native bf16's; prints both and `note`."""
    assert torch.isfinite(ours).all()
    (max_n, mean_n), (max_x, mean_x) = errors(native, ref), errors(ours, ref)
    print(f"\n{name}: |native bf16 - fp32| max {max_n:.3e} mean {mean_n:.3e}; |xstage - fp32| max {max_x:.3e} "
          f"mean {mean_x:.3e}; {note}")
    assert max_x <= MAX_RATIO * max_n, (max_x, max_n)
    assert mean_x <= MEAN_RATIO * mean_n, (mean_x, mean_n)


def shapes(s):
    return {tuple(r["shape"]): r["calls"] for r in s["routed_by_shape"]}


def test_wan21_14b_blocks_self_and_cross_attention_on_xstage():
    from diffusers import WanTransformer3DModel
    model = build(WanTransformer3DModel, num_layers=2)   # defaults are Wan2.1-14B's: 40 heads x 128
    g = torch.Generator("cuda").manual_seed(1)
    inputs = dict(hidden_states=torch.randn(1, 16, 3, 30, 52, device="cuda", generator=g),   # 3*15*26 = 1170 tokens
                  timestep=torch.tensor([500], device="cuda"),
                  encoder_hidden_states=torch.randn(1, 512, 4096, device="cuda", generator=g))
    s = compare("Wan2.1-14B x2 blocks", model, inputs)
    assert s["routed"] == 4 and s["fallback_total"] == 0
    assert shapes(s) == {(1, 1170, 1170, 40, 128): 2, (1, 1170, 512, 40, 128): 2}


def test_flux_joint_and_single_blocks_on_xstage():
    from diffusers import FluxTransformer2DModel
    model = build(FluxTransformer2DModel, num_layers=1, num_single_layers=2, guidance_embeds=True)   # 24 x 128
    g = torch.Generator("cuda").manual_seed(2)
    ids = torch.stack(torch.meshgrid(torch.zeros(1), torch.arange(32.0), torch.arange(32.0), indexing="ij"), -1)
    inputs = dict(hidden_states=torch.randn(1, 1024, 64, device="cuda", generator=g),
                  encoder_hidden_states=torch.randn(1, 256, 4096, device="cuda", generator=g),
                  pooled_projections=torch.randn(1, 768, device="cuda", generator=g),
                  timestep=torch.tensor([0.5], device="cuda"), guidance=torch.tensor([3.5], device="cuda"),
                  img_ids=ids.reshape(-1, 3).cuda(), txt_ids=torch.zeros(256, 3, device="cuda"))
    s = compare("Flux 1+2 blocks", model, inputs)
    assert s["routed"] == 3 and s["fallback_total"] == 0
    assert shapes(s) == {(1, 1280, 1280, 24, 128): 3}


def test_hunyuan_video_blocks_with_text_padding_on_xstage():
    from diffusers import HunyuanVideoTransformer3DModel
    model = build(HunyuanVideoTransformer3DModel, num_layers=1, num_single_layers=1, num_refiner_layers=1)
    g = torch.Generator("cuda").manual_seed(3)
    mask = torch.zeros(1, 256, dtype=torch.long, device="cuda")
    mask[:, :200] = 1   # 200 of 256 text tokens are real: the blocks get a key-padding prefix mask
    inputs = dict(hidden_states=torch.randn(1, 16, 3, 32, 32, device="cuda", generator=g),   # 3*16*16 = 768 tokens
                  timestep=torch.tensor([500], device="cuda"),
                  encoder_hidden_states=torch.randn(1, 256, 4096, device="cuda", generator=g),
                  encoder_attention_mask=mask, pooled_projections=torch.randn(1, 768, device="cuda", generator=g),
                  guidance=torch.tensor([6000.0], device="cuda"))
    s = compare("HunyuanVideo 1+1 blocks", model, inputs)
    assert s["routed"] == 2 and s["routed_with_mask"] == 2 and s["fallback_total"] == 0
    assert shapes(s) == {(1, 1024, 1024, 24, 128): 2}
    assert s["not_routable_processors"] == {"AttnProcessor2_0": 1}   # the token refiner calls SDPA itself


needs_sdpa_registry = pytest.mark.skipif(not hasattr(torch.nn.attention, "activate_flash_attention_impl"),
                                         reason=f"torch {torch.__version__} has no activate_flash_attention_impl")


def compare_sdpa_route(name, model32, inputs32):
    """The model unmodified on diffusers' native backend, torch's flash op served by xstage
    (activate_flash_attention_impl("xstage")): the same tolerance as compare(); returns the served and passed
    counts of the bf16 run."""
    from torch.nn import attention
    from xstage import _torch_sdpa
    model16 = copy.deepcopy(model32).to(torch.bfloat16)
    inputs16 = {k: v.to(torch.bfloat16) if torch.is_floating_point(v) else v for k, v in inputs32.items()}
    with torch.inference_mode():
        ref = model32(**inputs32).sample
        native = model16(**inputs16).sample
        before = _torch_sdpa.counts()
        attention.activate_flash_attention_impl("xstage")
        try:
            ours = model16(**inputs16).sample
            torch.cuda.synchronize()
        finally:
            attention.restore_flash_attention_impl()
        after = _torch_sdpa.counts()
        again = model16(**inputs16).sample   # restored: PyTorch's own kernel again
    counts = {k: after[k] - before[k] for k in after}
    assert_within_rule(f"{name} via SDPA", ours, native, ref, str(counts))
    assert torch.equal(again, native)
    return counts


@needs_sdpa_registry
def test_wan21_14b_blocks_through_the_sdpa_route():
    from diffusers import WanTransformer3DModel
    model = build(WanTransformer3DModel, num_layers=2)
    g = torch.Generator("cuda").manual_seed(1)
    inputs = dict(hidden_states=torch.randn(1, 16, 3, 30, 52, device="cuda", generator=g),
                  timestep=torch.tensor([500], device="cuda"),
                  encoder_hidden_states=torch.randn(1, 512, 4096, device="cuda", generator=g))
    assert compare_sdpa_route("Wan2.1-14B x2 blocks", model, inputs) == {"served": 4, "passed": 0}


@needs_sdpa_registry
def test_flux_blocks_through_the_sdpa_route():
    from diffusers import FluxTransformer2DModel
    model = build(FluxTransformer2DModel, num_layers=1, num_single_layers=2, guidance_embeds=True)
    g = torch.Generator("cuda").manual_seed(2)
    ids = torch.stack(torch.meshgrid(torch.zeros(1), torch.arange(32.0), torch.arange(32.0), indexing="ij"), -1)
    inputs = dict(hidden_states=torch.randn(1, 1024, 64, device="cuda", generator=g),
                  encoder_hidden_states=torch.randn(1, 256, 4096, device="cuda", generator=g),
                  pooled_projections=torch.randn(1, 768, device="cuda", generator=g),
                  timestep=torch.tensor([0.5], device="cuda"), guidance=torch.tensor([3.5], device="cuda"),
                  img_ids=ids.reshape(-1, 3).cuda(), txt_ids=torch.zeros(256, 3, device="cuda"))
    assert compare_sdpa_route("Flux 1+2 blocks", model, inputs) == {"served": 3, "passed": 0}


def cosine_and_rel_l1(out, ref):
    x, r = out.double().flatten(), ref.double().flatten()
    return (x @ r / (x.norm() * r.norm())).item(), ((x - r).abs().sum() / r.abs().sum()).item()


def test_wan21_14b_blocks_on_xstage_fp8():
    """precision="fp8": every call of the two blocks on the FP8 kernel (strict), the output close to the fp32
    reference. Bars: the model's output keeps its residual stream, so it is nearer the reference than one attention
    call (cosine >= 0.999 there); 0.995 leaves room for two blocks of FP8 attention error. Both printed."""
    from diffusers import WanTransformer3DModel
    model32 = build(WanTransformer3DModel, num_layers=2)
    g = torch.Generator("cuda").manual_seed(1)
    inputs32 = dict(hidden_states=torch.randn(1, 16, 3, 30, 52, device="cuda", generator=g),
                    timestep=torch.tensor([500], device="cuda"),
                    encoder_hidden_states=torch.randn(1, 512, 4096, device="cuda", generator=g))
    model16 = copy.deepcopy(model32).to(torch.bfloat16)
    inputs16 = {k: v.to(torch.bfloat16) if torch.is_floating_point(v) else v for k, v in inputs32.items()}
    with torch.inference_mode():
        ref = model32(**inputs32).sample
        native = model16(**inputs16).sample
        with xd.enabled(model16, strict=True, precision="fp8"):
            ours = model16(**inputs16).sample
            s = xd.stats(model16)
    assert torch.isfinite(ours).all()
    cos8, rel8 = cosine_and_rel_l1(ours, ref)
    cos16, rel16 = cosine_and_rel_l1(native, ref)
    print(f"\nWan2.1-14B x2 blocks fp8: cosine {cos8:.6f} rel_l1 {rel8:.4f}; native bf16: cosine {cos16:.6f} "
          f"rel_l1 {rel16:.4f}")
    assert s["kernel"] == "xstage_fp8" and s["routed"] == 4 and s["fallback_total"] == 0
    assert shapes(s) == {(1, 1170, 1170, 40, 128): 2, (1, 1170, 512, 40, 128): 2}
    assert cos8 >= 0.995, (cos8, rel8)


def test_fp8_head_dim_64_falls_back_with_its_reason():
    from diffusers import WanTransformer3DModel
    model = build(WanTransformer3DModel, num_layers=1, num_attention_heads=4, attention_head_dim=64, in_channels=16,
                  out_channels=16, text_dim=64, freq_dim=64, ffn_dim=128).to(torch.bfloat16)
    g = torch.Generator("cuda").manual_seed(4)
    inputs = dict(hidden_states=torch.randn(1, 16, 1, 16, 16, device="cuda", generator=g, dtype=torch.bfloat16),
                  timestep=torch.tensor([500], device="cuda"),
                  encoder_hidden_states=torch.randn(1, 32, 64, device="cuda", generator=g, dtype=torch.bfloat16))
    with torch.inference_mode():
        ref = model(**inputs).sample
        with xd.enabled(model, precision="fp8"):
            out = model(**inputs).sample
            s = xd.stats(model)
        with xd.enabled(model, precision="bf16"):
            model(**inputs)
            s16 = xd.stats(model)
    assert torch.equal(out, ref)   # every call went to the previous backend, unchanged
    assert s["routed"] == 0 and s["fallback"] == {"head_dim": 2}
    assert s16["routed"] == 2 and s16["fallback_total"] == 0   # the bf16 kernel takes head dim 64
