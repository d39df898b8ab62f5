#include "core/demangle.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <typeinfo>

namespace fiber::detail {

std::string demangle(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> readable(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && readable ? readable.get() : mangled;
}

std::string type_name_of(const std::exception& e) { return demangle(typeid(e).name()); }

}  // namespace fiber::detail
