// Readable C++ names, for errors that name a function or an exception's type.
#pragma once
#include <exception>
#include <string>

namespace fiber::detail {

/// The readable form of a mangled symbol or type name; the name itself when it is not mangled.
std::string demangle(const char* mangled);
/// The readable type of `e` ("std::invalid_argument"), as remote errors report it.
std::string type_name_of(const std::exception& e);

}  // namespace fiber::detail
