#include "core/token_file.hpp"

#include <cstdlib>
#include <fstream>

namespace fiber::detail {

std::string token_in_file(const char* variable) {
  const char* path = std::getenv(variable);
  if (!path || !*path) return {};
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  return token;
}

}  // namespace fiber::detail
