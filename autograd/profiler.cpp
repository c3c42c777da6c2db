// The op-level profiler (autograd/profiler.h): spans of the outermost scopes on a Timeline, added
// up per op family at the end of each step, and the table and JSON made from the totals.
#include "autograd/profiler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/backend/timeline.h"
#include "core/base/error.h"

namespace relgrad {

Profiler::Profiler(Device device) : device_(device), timeline_(std::make_unique<backend::Timeline>(device)) {}

Profiler::~Profiler() {
  if (profiler_detail::active == this) profiler_detail::active = nullptr;
}

void Profiler::begin_step() {
  RG_CHECK(!in_step_ && profiler_detail::active == nullptr, "profile",
           "a profiled step is already open on this thread (begin_step twice without end_step)");
  spans_.clear();
  depth_ = 0;
  timeline_->read();  // drops marks of a cancelled step
  timeline_->mark();  // mark 0: the step's start
  in_step_ = true;
  profiler_detail::active = this;
}

void Profiler::enter(const char* op, bool backward) {
  if (depth_++ == 0) spans_.push_back({op, backward, timeline_->mark(), 0, 0.0});
}

void Profiler::leave() {
  if (depth_ <= 0) return;  // a scope that outlived a cancelled step
  if (--depth_ == 0) spans_.back().end = timeline_->mark();
}

void Profiler::end_step() {
  RG_CHECK(in_step_, "profile", "end_step without begin_step");
  RG_CHECK(depth_ == 0, "profile", "end_step inside an op (", depth_, " scopes still open)");
  const size_t last = timeline_->mark();
  profiler_detail::active = nullptr;
  in_step_ = false;
  const std::vector<double> t = timeline_->read();  // one wait for the device
  step_seconds_ += t[last] - t[0];
  ++steps_;
  for (const Span& s : spans_) {
    Total& total = totals_[std::string(s.op) + (s.backward ? ".backward" : "")];
    ++total.calls;
    total.seconds += t[s.end] - t[s.start];
    total.flops += s.flops;
  }
  spans_.clear();
}

void Profiler::cancel_step() {
  if (profiler_detail::active == this) profiler_detail::active = nullptr;
  in_step_ = false;
  depth_ = 0;
  spans_.clear();
  timeline_->read();
}

ProfileReport Profiler::report() const {
  ProfileReport r;
  r.device = device_.str();
  r.steps = steps_;
  r.step_seconds = step_seconds_;
  for (const auto& [op, total] : totals_) r.rows.push_back({op, total.calls, total.seconds, total.flops});
  std::stable_sort(r.rows.begin(), r.rows.end(),
                   [](const ProfileRow& a, const ProfileRow& b) { return a.seconds > b.seconds; });
  return r;
}

double attention_flops(int64_t B, int64_t H, int64_t t2, int64_t t1, int64_t D, bool causal, bool backward) {
  const double forward = 4.0 * double(B) * double(H) * double(t2) * double(t1) * double(D) * (causal ? 0.5 : 1.0);
  return backward ? 2.5 * forward : forward;
}

// ---- the report ------------------------------------------------------------------------------------
double ProfileReport::attributed_seconds() const {
  double s = 0;
  for (const ProfileRow& row : rows) s += row.seconds;
  return s;
}

const ProfileRow* ProfileReport::find(const std::string& op) const {
  for (const ProfileRow& row : rows)
    if (row.op == op) return &row;
  return nullptr;
}

namespace {
double share(double seconds, double total) { return total > 0 ? seconds / total : 0.0; }
}  // namespace

std::string ProfileReport::table() const {
  std::ostringstream out;
  char line[160];
  std::string which = std::to_string(steps) + (steps == 1 ? " step" : " steps");
  if (first_step > 0 && steps > 0)
    which += steps == 1 ? " (step " + std::to_string(first_step) + ")"
                        : " (steps " + std::to_string(first_step) + "-" + std::to_string(first_step + steps - 1) + ")";
  std::snprintf(line, sizeof line, "profile: %s on %s, %.3f ms per step\n", which.c_str(), device.c_str(),
                steps > 0 ? 1e3 * step_seconds / double(steps) : 0.0);
  out << line;
  std::snprintf(line, sizeof line, "  %-40s %8s %12s %8s %9s\n", "op", "calls", "total ms", "share", "GFLOP/s");
  out << line;
  for (const ProfileRow& row : rows) {
    char rate[32] = "";
    if (row.flops > 0 && row.seconds > 0) std::snprintf(rate, sizeof rate, "%9.2f", row.flops / row.seconds / 1e9);
    std::snprintf(line, sizeof line, "  %-40s %8lld %12.3f %7.1f%% %9s", row.op.c_str(), (long long)row.calls,
                  1e3 * row.seconds, 100 * share(row.seconds, step_seconds), rate);
    std::string text = line;
    text.erase(text.find_last_not_of(' ') + 1);  // no trailing blanks where there is no rate
    out << text << "\n";
  }
  std::snprintf(line, sizeof line, "  %-40s %8s %12.3f %7.1f%%\n", "(unattributed: host, data, bookkeeping)", "",
                1e3 * unattributed_seconds(), 100 * share(unattributed_seconds(), step_seconds));
  out << line;
  std::snprintf(line, sizeof line, "  %-40s %8lld %12.3f %7.1f%%\n", "step total", (long long)steps,
                1e3 * step_seconds, steps > 0 ? 100.0 : 0.0);
  out << line;
  return out.str();
}

std::string ProfileReport::json() const {
  std::ostringstream out;
  out.precision(9);
  auto number = [&](double v) -> std::ostringstream& {
    if (std::isfinite(v)) out << v;
    else out << "null";
    return out;
  };
  out << "{\n  \"device\": \"" << device << "\",\n  \"steps\": " << steps << ",\n  \"first_step\": " << first_step
      << ",\n  \"step_total_s\": ";
  number(step_seconds) << ",\n  \"unattributed_s\": ";
  number(unattributed_seconds()) << ",\n  \"unattributed_share\": ";
  number(share(unattributed_seconds(), step_seconds)) << ",\n  \"ops\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const ProfileRow& row = rows[i];
    out << (i ? ",\n" : "\n") << "    {\"op\": \"" << row.op << "\", \"calls\": " << row.calls << ", \"total_s\": ";
    number(row.seconds) << ", \"share\": ";
    number(share(row.seconds, step_seconds)) << ", \"flops\": ";
    number(row.flops) << ", \"gflops_per_s\": ";
    if (row.flops > 0 && row.seconds > 0) number(row.flops / row.seconds / 1e9);
    else out << "null";
    out << "}";
  }
  out << (rows.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return out.str();
}

}  // namespace relgrad
