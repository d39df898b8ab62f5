#include "cli/recording_taker.hpp"

#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/private_files.hpp"
#include "runtime/observe/recording_handoff.hpp"

namespace fiber::cli {
namespace fs = std::filesystem;

recording_taker::recording_taker(asio::io_context& io, std::string token, std::string folder)
    : http_(io), token_(std::move(token)), folder_(std::move(folder)) {}

bool recording_taker::take_if_offered(std::string_view line, const route_fn& route, detail::unique_function<void()> done) {
  if (token_.empty()) return false;
  auto offer = detail::handoff_in_line(line);
  if (!offer) return false;
  detail::http_request req;
  route(req, offer->port, "/recording?token=" + token_);
  req.timeout = std::chrono::minutes(10);  // up to record_max_bytes through the API server
  auto body = std::make_shared<std::string>();
  http_.start(
      std::move(req),
      [body, offer = *offer, folder = folder_, done = std::move(done)](std::error_code ec, const detail::http_response& r) mutable {
        if (!r.body.empty()) *body += r.body;
        auto path = (fs::path(folder) / offer.file).string();
        std::string why;
        if (ec) why = ec.message();
        else if (r.status != 200) why = "HTTP " + std::to_string(r.status) + ": " + r.body;
        else if (body->size() != offer.bytes)
          why = "it came cut short (" + std::to_string(body->size()) + " of " + std::to_string(offer.bytes) + " bytes)";
        if (why.empty()) {
          std::error_code made;
          detail::make_private_folder(folder, made);
          if (auto failed = detail::write_private_file(path, *body)) why = "cannot write " + path + ": " + failed.message();
        }
        if (why.empty())
          std::fprintf(stderr, "fiber: the run's recording is kept here: %s (fiber history lists it)\n", path.c_str());
        else
          std::fprintf(stderr, "fiber: could not take the run's recording from its pod: %s\n", why.c_str());
        done();
      },
      [body](std::string_view piece) { body->append(piece); });
  return true;
}

}  // namespace fiber::cli
