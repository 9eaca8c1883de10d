// Design test of recurring bursts as a kernel issues them, through the simulator: K producers that
// each repeat (burst of B bytes, gap G), all starting together (the aligned worst case for the first
// burst), with first-come service on the full path. Eq. 10's capacity bound is a statement about an
// aligned burst; after one stall the producers stay staggered, so in steady state only the rate bound
// binds (measured on the H200 pair: docs/model.md "Fidelity"). This check says which bound binds and
// by how much, per burst, and never reports a stall the steady state does not have.
#pragma once

#include <string>

#include "xstage/model/burst_gap.hpp"
#include "xstage/model/platform.hpp"

namespace xstage::sim {

struct RecurringBurstCheck {
  double first_burst_stall_s = 0.0;   // median producer's stall of the first, aligned burst
  double steady_stall_s = 0.0;        // median producer's mean stall per burst after the first
  model::DesignAction action;         // reshape only when the steady state stalls
  const char* binding_bound = "none";  // "rate", "capacity (first aligned burst only)" or "none"
  double tolerance_s = 0.0;           // a stall counts above this (1 % of T_iss0 + G)
};

// A stall counts when it exceeds 1 % of T_iss0 + G (below that it is the simulator's tolerance).
// The verdict of simulated stalls (the first burst's, and the mean per burst after it) for bursts with issue
// floor T_iss0 and gap G: recurring_burst_check's rule, for any simulated schedule.
RecurringBurstCheck classify_recurring_stalls(double first_burst_stall_s, double steady_stall_s, double t_iss0_s,
                                              double gap_s);
// Refuses (InputError) a check above the work limit before anything is allocated: kMaxRecurringBurstWork.
// Bursts of 0 bytes (every store local: a MoE Combine on one rank) put nothing in the path: keep, no stall.
RecurringBurstCheck recurring_burst_check(const model::Platform& platform, int producers, double bytes_per_producer,
                                          double gap_s, int bursts = 12);

// Work limit of one recurring-burst check. Its simulation has about producers x bursts events (the aligned
// producers finish one after another on the full path) and each event visits every producer, so its time grows
// with producers^2 x bursts: 2^24 is about a second on one core (measured: 3344^2 x 12 took 8.6 s). 132 producers
// may have up to 962 bursts; 24 bursts up to 836 producers (a GPU has a few hundred SMs at most).
inline constexpr double kMaxRecurringBurstWork = 1 << 24;
inline double recurring_burst_work(double producers, double bursts) { return producers * producers * bursts; }
// The largest producer count within the limit at `bursts` bursts.
int max_recurring_burst_producers(int bursts);
// Throws InputError "<what>: P producers^2 x B bursts = W exceeds the limit of 16777216 of the recurring-burst
// simulation (at B bursts: at most N producers)" when the work exceeds kMaxRecurringBurstWork.
void require_recurring_burst_work_within(const std::string& what, double producers, double bursts);

}  // namespace xstage::sim
