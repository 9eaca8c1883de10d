#!/usr/bin/env bash
# Diagnostic on the GPU machine: the layer on ONE GPU (every row local, so the fused epilogue stores
# locally) to separate the fused kernel's own cost from the cost of remote traffic; SASS of the fused
# and local attention kernels for a diff. BUILD: folder with xstage (default .ulysses_build).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl_lib=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=$nccl_lib:${LD_LIBRARY_PATH:-}
B=${BUILD:-build}
for m in 32768 65536; do
  timeout 60 $B/xstage attn ulysses --gpus 0 --seq $m --heads 4 --variant fa-only,fa-only-tma,serial-ours,fused-tma,coupled-tma --iters 15 --passes 2 --out $OUT/one_gpu_$m.json 2>&1 | tail -8
done
cuobjdump --dump-sass $B/xstage > /tmp/all.sass 2>/dev/null
# AttnEpilogueA2A<Traits, kCompletionCoupled>: Lb0 is fused-tma's kernel, Lb1 coupled-tma's.
awk '/Function :/{p=0} /Function : .*attn_forward_kernel.*AttnEpilogueA2AIS3_Lb0EE/{p=1} p' /tmp/all.sass > $OUT/sass_fused_tma.txt
awk '/Function :/{p=0} /Function : .*attn_forward_kernel.*AttnEpilogueA2AIS3_Lb1EE/{p=1} p' /tmp/all.sass > $OUT/sass_coupled_tma.txt
awk '/Function :/{p=0} /Function : .*attn_forward_kernel.*Li128ELi128ELi2ELb1EEENS0_17AttnEpilogueLocal/{p=1} p' /tmp/all.sass > $OUT/sass_local.txt
wc -l $OUT/*.txt
