"""xstage.distributed.FusedMoE: the fused MoE layer expert-parallel over a torch.distributed group (NCCL).

Each rank holds experts / world experts (rank r: global experts [r * E_local, (r + 1) * E_local)) and its own
tokens, routed over all experts; the fused kernel dispatches each token row to its expert's rank and combines
the expert outputs back into the token's rank from inside the kernel (stores into the peers' symmetric NCCL
windows), as xstage.FusedMoE does on one GPU. Layouts and roundings: xstage.moe.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from . import _torch_moe
from ._dist_team import DEFAULT_WAIT_TIMEOUT_S, Team, _resolve_group, _timeout_arg
from ._moe_abi import PRECISIONS, SCHEDULES, _choice, _int_arg, _Layer, _register


class FusedMoE(torch.nn.Module):
    """The fused MoE layer, expert-parallel over `group` (NCCL backend; None: the world group).

    FusedMoE(w1, w2, *, top_k, group=None, precision=None (from w1's dtype) | "bf16" | "fp8", w1_scale=None,
             w2_scale=None, schedule="auto" | "interleaved" | "wave", max_tokens=16384, lead_rows=0, experts_per_wave=0,
             timeout=60, wait_timeout=10)
      w1 [E_local, 2*h_inter, hidden], w2 [E_local, hidden, h_inter] (fp8: e4m3 with their 128 x 128 block
      scales): this rank's experts, global experts [rank * E_local, (rank + 1) * E_local) of E = E_local * world.
    forward(x [..., hidden] bf16, topk_ids [T, top_k] (global expert ids), topk_weights [T, top_k]) -> y (x's
      shape): this rank's tokens. Collective: every rank of the group calls forward once per step, in the same
      order; T may differ between ranks (0 included: a rank without tokens still serves the others' rows).

    Construction is collective too (the team on first use of the group, then the layer's symmetric windows).
    max_tokens bounds each rank's T. wait_timeout (0, 10] bounds each in-kernel wait: when a rank does not
    arrive, the others' kernels record the rank, the wait and the peer, and trap (the CUDA context is lost);
    forward, synchronize() and Team.synchronize() then raise TimeoutError naming this rank and the step.
    """

    def __init__(self, w1: torch.Tensor, w2: torch.Tensor, *, top_k: int, group: Any = None,
                 precision: Optional[str] = None, w1_scale: Optional[torch.Tensor] = None,
                 w2_scale: Optional[torch.Tensor] = None, schedule: str = "auto", max_tokens: int = 16384,
                 lead_rows: int = 0, experts_per_wave: int = 0, timeout: float = 60.0,
                 wait_timeout: float = DEFAULT_WAIT_TIMEOUT_S) -> None:
        super().__init__()
        where = "xstage.distributed.FusedMoE"
        # Scalars first, then the tensors, then the group: each bad argument is named the same way on any machine.
        if precision is not None:
            _choice(precision, PRECISIONS, "precision", where)
        wait_timeout = _timeout_arg(wait_timeout, "wait_timeout", where)
        if wait_timeout > 10.0:
            raise ValueError(f"{where}: wait_timeout {wait_timeout!r}; accepted: at most 10 seconds (the kernel's "
                             "bound)")
        timeout = _timeout_arg(timeout, "timeout", where)
        _int_arg(top_k, "top_k", where, 1)
        _int_arg(max_tokens, "max_tokens", where, 1)
        _choice(schedule, SCHEDULES, "schedule", where)
        _int_arg(lead_rows, "lead_rows", where, 0)
        _int_arg(experts_per_wave, "experts_per_wave", where, 0)
        local_experts, hidden, h_inter, precision = _torch_moe._module_weights(w1, w2, precision, w1_scale, w2_scale,
                                                                               where)
        group = _resolve_group(group, where)
        team = Team(group, timeout=timeout)
        if w1.get_device() != team.device:
            raise ValueError(f"{where}: w1 is on {w1.device}; the group's team runs on cuda:{team.device} (the "
                             "current device when the team was made)")
        self.rank, self.world = team.rank, team.world
        self.local_experts = local_experts
        self.experts = local_experts * team.world
        self._team = team
        self._layer = _Layer(where, team.device, hidden, h_inter, self.experts, top_k, max_tokens, precision, schedule,
                             lead_rows, experts_per_wave, team=(team.handle, wait_timeout, team))
        team._adopt(self._layer)
        self._layer_id = _register(self._layer)
        self.top_k = top_k
        self.precision = precision
        self.wait_timeout = wait_timeout
        self.register_buffer("w1", w1)
        self.register_buffer("w2", w2)
        self.register_buffer("w1_scale", w1_scale)
        self.register_buffer("w2_scale", w2_scale)
        _torch_moe._set_weights(self._layer, w1, w2, w1_scale, w2_scale, where)

    @classmethod
    def from_bf16(cls, w1: torch.Tensor, w2: torch.Tensor, *, top_k: int, precision: str = "bf16",
                  **kwargs: Any) -> "FusedMoE":
        """This rank's bf16 expert weights, quantized on the device first for precision "fp8"."""
        return _torch_moe._from_bf16(cls, w1, w2, top_k, precision, kwargs)

    @property
    def expert_range(self) -> range:
        """The global ids of the experts this rank holds."""
        return range(self.rank * self.local_experts, (self.rank + 1) * self.local_experts)

    @property
    def max_tokens(self) -> int:
        """The most tokens one forward takes on this rank (the workspace's size)."""
        return self._layer.max_tokens

    def info(self) -> dict:
        """grid, schedule_param (as launched), runs so far, rank and world."""
        return dict(self._layer.info(), rank=self.rank, world=self.world)

    def last_failure(self) -> str:
        """The in-kernel wait that expired in an earlier run ("" when none)."""
        return self._layer.last_failure()

    def synchronize(self, timeout: Optional[float] = None) -> None:
        """Team.synchronize of this layer's team: the work enqueued so far on the current stream, bounded."""
        self._team.synchronize(timeout)

    def forward(self, x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
        """y = the layer on this rank's tokens x [..., hidden] bf16, routed by topk_ids [T, top_k] (global expert
        ids) and topk_weights [T, top_k]; y has x's shape. Collective: every rank of the group calls it once per
        step in the same order. Raises TimeoutError naming the rank and step when an earlier run's wait expired."""
        where = "xstage.distributed.FusedMoE"
        self._team._raise_failures(where)
        return _torch_moe._forward(self._layer_id, self._layer, x, topk_ids, topk_weights, self.w1, self.w2,
                                   self.w1_scale, self.w2_scale, where)

    def extra_repr(self) -> str:
        la = self._layer
        return (f"experts={self.experts} ({self.local_experts} on rank {self.rank} of {self.world}), "
                f"hidden={la.hidden}, h_inter={la.h_inter}, top_k={la.top_k}, precision={la.precision}, "
                f"schedule={la.schedule}, max_tokens={la.max_tokens}")
