// The host-and-device function qualifiers of pure headers (schedulers, layouts, numerics, probe
// patterns): the kernels and the CPU tests run the same functions. Under nvcc they are __host__
// __device__; a CPU-only build compiles the same headers with the host compiler, where they expand
// to nothing (XSTAGE_HOST_DEVICE) or to `inline` (XSTAGE_HOST_DEVICE_INLINE). No CUDA header needed.
#pragma once

#if defined(__CUDACC__)
// A function both sides call; inlining is the compiler's choice (class members, constexpr functions).
#define XSTAGE_HOST_DEVICE __host__ __device__
// A small free function in a header: always inlined on the device, `inline` (one definition) on the host.
#define XSTAGE_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#else
#define XSTAGE_HOST_DEVICE
#define XSTAGE_HOST_DEVICE_INLINE inline
#endif
