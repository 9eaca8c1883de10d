// The one device check of the GPU subcommands: called after every argument and file check, before any
// other CUDA or NCCL call, so a machine without a usable GPU gets one line and exit code 2.
#pragma once

#include <string>
#include <vector>

namespace xstage::cli {

// Throws InputError "attn bench: no usable CUDA device 0 (cudaGetDeviceCount: CUDA driver version is
// insufficient for CUDA runtime version)" when the driver reports no device, an error, or fewer devices
// than the largest ordinal in `devices`. `command` names the subcommand ("moe bench").
void require_cuda_devices(const std::string& command, const std::vector<int>& devices);

}  // namespace xstage::cli
