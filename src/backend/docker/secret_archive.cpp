#include "backend/docker/secret_archive.hpp"

#include <cstdio>
#include <cstring>

#include "fiber/error.hpp"

namespace fiber::detail {
namespace {

constexpr std::size_t block = 512;

/// `value` in octal, zero-padded to fill `width - 1` digits and a NUL, as ustar writes numbers.
void octal(char* at, std::size_t width, unsigned long long value) {
  const std::size_t digits = width - 1;
  if (digits < 21 && (value >> (3 * digits)) != 0)
    throw error(errc::message_too_large, "a secret's archive cannot hold the number " + std::to_string(value) + " in " +
                                             std::to_string(digits) + " octal digits");
  at[digits] = '\0';
  for (std::size_t i = digits; i-- > 0; value >>= 3) at[i] = static_cast<char>('0' + (value & 7));
}

void entry(std::string& out, std::string_view name, char type, unsigned mode, unsigned uid, unsigned gid,
           std::string_view data) {
  char h[block] = {};
  std::memcpy(h, name.data(), name.size());  // names here are short and fixed
  octal(h + 100, 8, mode);
  octal(h + 108, 8, uid);
  octal(h + 116, 8, gid);
  octal(h + 124, 12, data.size());
  octal(h + 136, 12, 0);  // mtime
  h[156] = type;
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);  // NOLINT(bugprone-not-null-terminated-result): ustar's version, two digits, no NUL
  std::memset(h + 148, ' ', 8);  // the checksum counts its own field as spaces
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);  // six digits, a NUL, and the space already there
  out.append(h, block);
  out.append(data);
  out.append((block - data.size() % block) % block, '\0');
}

}  // namespace

std::string secret_archive(std::string_view text, unsigned uid, unsigned gid) {
  std::string out;
  entry(out, ".fiber-keys/", '5', 0700, uid, gid, {});
  entry(out, ".fiber-keys/keys", '0', 0400, uid, gid, text);
  out.append(2 * block, '\0');  // the end of the archive
  return out;
}

}  // namespace fiber::detail
