// What a pool's new workers start with, and what a function's needs are compared by. The pool's
// needs, joined with each raise a function declared (`fiber::needs`); each need left at 0 is
// taken as the config's default. Memory is a limit as well as a need: a worker without a limit
// (0) covers no function that declares one, one with a limit covers functions that ask for no
// more; functions that declare different limits get workers with the largest. A raise is
// pending until a worker started with it connects (met), or workers with it cannot start
// (refused: back to the needs the running workers were started with). No process, no loop.
#pragma once
#include "fiber/config.hpp"
#include "fiber/meta.hpp"

namespace fiber::detail {

class worker_needs {
 public:
  /// `cfg` (the defaults) outlives this.
  worker_needs(const meta& needs, const fiber::config& cfg) : now_(needs), base_(needs), cfg_(cfg) {}

  /// `needs` with the defaults filled in: what needs are compared by.
  meta full(const meta& needs) const;
  /// Whether a worker started now meets `needs`.
  bool covers(const meta& needs) const { return full(now_).covers(full(needs)); }
  /// What new workers start with, as asked and filled in.
  const meta& now() const noexcept { return now_; }
  meta full_now() const { return full(now_); }
  /// New workers start with `needs` joined in; pending until met or refused.
  void raise(const meta& needs) { now_ = now_.joined(needs); }
  bool pending() const noexcept { return !(now_ == base_); }
  /// A worker with `has` (filled in) connected: true when it has what new workers start with,
  /// which is then the base (a pending raise is met).
  bool met_by(const meta& has);
  /// Workers with the raise cannot start: back to the base; returns the refused needs, filled in.
  meta refuse();

 private:
  meta now_, base_;  // base_: what the workers that connected were started with
  const fiber::config& cfg_;
};

}  // namespace fiber::detail
