// A move-only std::function (std::move_only_function is C++23).
#pragma once
#include <memory>
#include <utility>

namespace fiber::detail {
template <class Sig>
class unique_function;

template <class R, class... A>
class unique_function<R(A...)> {
 public:
  unique_function() = default;
  unique_function(std::nullptr_t) {}
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, unique_function>>>
  unique_function(F&& f) : impl_(std::make_unique<model<std::decay_t<F>>>(std::forward<F>(f))) {}
  explicit operator bool() const noexcept { return impl_ != nullptr; }
  R operator()(A... a) { return impl_->call(std::forward<A>(a)...); }

 private:
  struct concept_t {
    virtual ~concept_t() = default;
    virtual R call(A... a) = 0;
  };
  template <class F>
  struct model : concept_t {
    F f;
    explicit model(F&& x) : f(std::move(x)) {}
    explicit model(const F& x) : f(x) {}
    R call(A... a) override { return f(std::forward<A>(a)...); }
  };
  std::unique_ptr<concept_t> impl_;
};
}  // namespace fiber::detail
