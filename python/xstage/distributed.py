"""xstage on torch.distributed: teams built from a ProcessGroup, Ulysses attention with the fused All-to-All and the
expert-parallel fused MoE (FusedMoE).

    # torchrun --nproc_per_node N script.py
    import torch, torch.distributed as dist
    import xstage.distributed as xd
    dist.init_process_group("nccl"); torch.cuda.set_device(local_rank)
    out = xd.ulysses_attention(q, k, v, group)        # q, k, v, out: [B, S_local, H, D] bf16, sequence-sharded
    out, joint_out = xd.ulysses_attention(q, k, v, group, joint_q=tq, joint_k=tk, joint_v=tv)   # xDiT's "rear"
    moe = xd.FusedMoE(w1_local, w2_local, top_k=8, group=group)   # this rank's experts; y = moe(x, ids, weights)

One team per group (cached): rank 0 of the group creates an NCCL unique id, the ranks exchange it through the
group's store (bounded: a rank that does not arrive is named), and each builds its NCCL communicator on its current
CUDA device with the libnccl torch loaded (bounded too). Multicast stays off. Every wait has a timeout argument;
a host-side timeout raises TimeoutError naming the rank and the step. The device-side waits for other ranks (the
Ulysses owner's wait for their stores, the fused MoE kernel's counts, rows and flags) are bounded by wait_timeout;
when one passes, the kernel records the rank and the wait in host memory and traps (the CUDA context is lost and
the process must restart); Team.synchronize() and every later forward then raise TimeoutError naming the rank, the
wait and the step.
"""

from ._dist_abi import check_split, shard_info
from ._dist_moe import FusedMoE
from ._dist_team import DEFAULT_TIMEOUT_S, DEFAULT_WAIT_TIMEOUT_S, Team
from ._dist_ulysses import HEAD_DIM, JOINT_STRATEGIES, UlyssesAttention, ulysses_attention

__all__ = ["DEFAULT_TIMEOUT_S", "DEFAULT_WAIT_TIMEOUT_S", "FusedMoE", "HEAD_DIM", "JOINT_STRATEGIES", "Team",
           "UlyssesAttention", "check_split", "shard_info", "ulysses_attention"]

# Documented (pydoc, help) and pickled (torch.save of a model holding a layer) under this module, where they are public.
for _obj in (FusedMoE, Team, UlyssesAttention, check_split, shard_info, ulysses_attention):
    _obj.__module__ = __name__
del _obj
