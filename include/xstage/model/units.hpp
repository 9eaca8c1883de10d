// Units of the whole project: bytes, seconds, bytes per second. Printing converts to µs, GB/s, MiB.
#pragma once

namespace xstage::units {

inline constexpr double kKiB = 1024.0;
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGB = 1e9;  // GB/s = 1e9 bytes/s

constexpr double us_to_s(double us) { return us * 1e-6; }
constexpr double s_to_us(double s) { return s * 1e6; }
constexpr double gbps_to_bytes_per_s(double gbps) { return gbps * kGB; }
constexpr double bytes_per_s_to_gbps(double bps) { return bps / kGB; }
constexpr double bytes_to_mib(double bytes) { return bytes / kMiB; }

}  // namespace xstage::units
