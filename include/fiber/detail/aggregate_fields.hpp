// fiber/detail/aggregate_fields.hpp - the fields of a plain aggregate, C arrays included.
//
// Boost.PFR counts an aggregate's fields by initializing it from N values that convert to any
// type. A value cannot convert to an array, so a member `int a[3]` takes three of them (brace
// elision): PFR counts 3 where there is 1, and its structured binding then fails with "N names
// provided" deep inside it. Here each field is initialized from an empty braced list instead, `{}`,
// which initializes one whole member, array or not, so the count is the number of members. Every
// member of an aggregate that the codec takes can be initialized so (the codec decodes into `T{}`,
// which does the same to each member), so the count is exact for every type it is asked about.
#pragma once
#include <boost/preprocessor/arithmetic/add.hpp>
#include <boost/preprocessor/arithmetic/inc.hpp>
#include <boost/preprocessor/repetition/enum.hpp>
#include <boost/preprocessor/repetition/enum_params.hpp>
#include <boost/preprocessor/repetition/repeat_from_to.hpp>
#include <cstddef>
#include <tuple>
#include <type_traits>

// The most members an aggregate may have to be encoded field by field.
#define FIBER_DETAIL_MAX_FIELDS 64

namespace fiber::detail {

template <class T, std::size_t N>
inline constexpr bool takes_braced_fields = false;
#define FIBER_DETAIL_EMPTY_BRACES(z, n, unused) {}
#define FIBER_DETAIL_TAKES_BRACED_FIELDS(z, n, unused) \
  template <class T>                                   \
  inline constexpr bool takes_braced_fields<T, n> = requires { T{BOOST_PP_ENUM_##z(n, FIBER_DETAIL_EMPTY_BRACES, ~)}; };
// (Up to one past the most, to tell a type that has more.)
BOOST_PP_REPEAT_FROM_TO(1, BOOST_PP_ADD(FIBER_DETAIL_MAX_FIELDS, 2), FIBER_DETAIL_TAKES_BRACED_FIELDS, ~)
#undef FIBER_DETAIL_TAKES_BRACED_FIELDS
#undef FIBER_DETAIL_EMPTY_BRACES

// The number of members of T: the most empty braced lists it can be initialized from (one more
// than that is "too many initializers"); FIBER_DETAIL_MAX_FIELDS + 1 when it has more.
template <class T, std::size_t N = 0>
constexpr std::size_t field_count() {
  if constexpr (N <= FIBER_DETAIL_MAX_FIELDS) {
    if constexpr (takes_braced_fields<T, N + 1>) return field_count<T, N + 1>();
  }
  return N;
}

// References to the members of `v`, in order, through a structured binding of exactly
// field_count<T>() names.
template <class T>
constexpr auto tie_fields(T& v) {
  constexpr std::size_t n = field_count<std::remove_const_t<T>>();
  static_assert(n <= FIBER_DETAIL_MAX_FIELDS,
                "fiber: this aggregate has more than 64 members, the most fiber encodes field by field; group "
                "some of them into a member aggregate, or specialize fiber::codec<T> (T is named in the 'In "
                "instantiation of' line above)");
  // (Past the static_assert there is nothing more to say: no members.)
  if constexpr (n == 0 || n > FIBER_DETAIL_MAX_FIELDS) {
    return std::tuple<>{};
  }
#define FIBER_DETAIL_TIE(z, k, unused)                          \
  else if constexpr (n == (k)) {                                \
    auto& [BOOST_PP_ENUM_PARAMS_Z(z, k, m)] = v;                \
    return std::tie(BOOST_PP_ENUM_PARAMS_Z(z, k, m));           \
  }
  BOOST_PP_REPEAT_FROM_TO(1, BOOST_PP_INC(FIBER_DETAIL_MAX_FIELDS), FIBER_DETAIL_TIE, ~)
#undef FIBER_DETAIL_TIE
}

}  // namespace fiber::detail
