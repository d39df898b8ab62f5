#include <fiber/registry.hpp>
#include <fiber/remote_class.hpp>
#include <gtest/gtest.h>

#include "support.hpp"

namespace sample {
int add(int a, int b) { return a + b; }
std::string shout(const std::string& s) { return s + "!"; }
}  // namespace sample
FIBER_REMOTE(sample::add);
FIBER_REMOTE(sample::shout);

int not_registered_function(int x) { return x; }
namespace {
int not_registered_and_internal(int x) { return x; }
}  // namespace

namespace sample {
struct tally {
  explicit tally(int start) : total(start) {}
  int bump(int by) { return total += by; }
  int total;
};
}  // namespace sample
FIBER_REMOTE_CLASS(sample::tally, bump);

TEST(registry, registered_functions_are_found_and_invoked_by_id) {
  const auto& e = fiber::detail::require_registered(&sample::add);
  EXPECT_NE(e.name.find("sample::add"), std::string::npos);
  ASSERT_EQ(fiber::detail::find_function(e.id), &e);

  fiber::writer args;
  args.value(std::make_tuple(2, 40));
  std::vector<std::span<const std::byte>> none;
  fiber::reader in({reinterpret_cast<const std::byte*>(args.head().data()), args.head().size()}, none);
  fiber::writer out;
  e.invoke(in, out);
  fiber::reader result({reinterpret_cast<const std::byte*>(out.head().data()), out.head().size()}, none);
  EXPECT_EQ(result.value<int>(), 42);
}

TEST(registry, ids_differ_between_functions) {
  EXPECT_NE(fiber::detail::require_registered(&sample::add).id, fiber::detail::require_registered(&sample::shout).id);
}

TEST(registry, unregistered_function_names_itself_and_the_macro) {
  fiber_test::expect_error([] { (void)fiber::detail::require_registered(&not_registered_function); },
                           fiber::errc::not_registered,
                           {"not_registered_function", "FIBER_REMOTE(not_registered_function)"});
}

// A lambda turned into a pointer (+[]) has no name another process could find: the error says so,
// and what to do instead.
TEST(registry, a_lambda_made_a_pointer_is_refused_with_the_way_out) {
  int (*f)(int) = [](int x) { return x + 1; };
  fiber_test::expect_error([&] { (void)fiber::detail::require_registered(f); }, fiber::errc::not_registered,
                           {"lambda", "FIBER_REMOTE(f)", "pass &f"});
}

// A function in an anonymous namespace has no exported name either: its fix is FIBER_REMOTE, and
// the error says so first, not only the lambda's way out.
TEST(registry, an_unregistered_function_in_an_anonymous_namespace_is_told_to_add_fiber_remote) {
  fiber_test::expect_error([] { (void)fiber::detail::require_registered(&not_registered_and_internal); },
                           fiber::errc::not_registered, {"anonymous namespace", "add FIBER_REMOTE(f) after it"});
}

TEST(registry, a_class_constructor_is_found_by_its_id_and_makes_the_object) {
  auto id = fiber::detail::constructor_id<sample::tally, int>::value;
  auto make = fiber::detail::find_constructor(id);
  ASSERT_NE(make, nullptr);
  EXPECT_EQ(fiber::detail::find_constructor(id + 1), nullptr);
  fiber::writer args;
  args.value(std::make_tuple(40));
  std::vector<std::span<const std::byte>> none;
  fiber::reader in({reinterpret_cast<const std::byte*>(args.head().data()), args.head().size()}, none);
  auto object = make(in);
  fiber::writer call_args, out;
  call_args.value(std::make_tuple(2));
  fiber::reader call_in({reinterpret_cast<const std::byte*>(call_args.head().data()), call_args.head().size()}, none);
  object->call(fiber::detail::stable_hash("bump"), call_in, out, fiber::detail::deferred_reply(0, 0));
  fiber::reader result({reinterpret_cast<const std::byte*>(out.head().data()), out.head().size()}, none);
  EXPECT_EQ(result.value<int>(), 42);
}

TEST(registry, digest_is_stable) { EXPECT_EQ(fiber::detail::registry_digest(), fiber::detail::registry_digest()); }

TEST(registry, arguments_with_trailing_bytes_are_malformed) {
  const auto& e = fiber::detail::require_registered(&sample::add);
  fiber::writer args;
  args.value(std::make_tuple(1, 2, 3));  // one argument too many
  std::vector<std::span<const std::byte>> none;
  fiber::reader in({reinterpret_cast<const std::byte*>(args.head().data()), args.head().size()}, none);
  fiber::writer out;
  fiber_test::expect_error([&] { e.invoke(in, out); }, fiber::errc::malformed_message);
}

