// The worker's side of a pool: runs the initializer, asks for work, runs chunks, sends results.
#include <algorithm>
#include <cstring>

#include "core/frames_reader.hpp"
#include "core/message_limit.hpp"
#include "core/remote_failure.hpp"
#include "fiber/context.hpp"
#include "fiber/registry.hpp"
#include "primitives/pool/wire.hpp"
#include "runtime/runtime.hpp"

FIBER_REMOTE(fiber::detail::pool_worker_main);

namespace fiber::detail {
void pool_worker_main(std::uint64_t pool_id, int credit, int maxtasks, std::uint64_t init_id,
                      std::vector<std::string> init_frames) {
  auto rt = context::default_context().runtime();
  if (init_id) {
    auto* entry = find_function(init_id);
    if (!entry) throw error(errc::not_registered, "pool initializer is not registered in this worker");
    frames_reader args(init_frames, 0);
    writer ignored;
    entry->invoke(args.get(), ignored);
  }
  // With maxtasksperchild, never ask for more chunks than this worker will run.
  int granted = maxtasks ? std::min(credit, maxtasks) : credit;
  rt->worker().send_upstream(make_message(pool_kind::ready, {.channel = pool_id, .aux = static_cast<std::uint32_t>(granted)}));
  int done = 0;
  for (;;) {
    auto m = rt->worker().next_service_message();
    auto h = parse_header(m[0]);
    if (h->type == pool_kind::stop) return;
    if (m.size() < 3) throw error(errc::malformed_message, "malformed pool task");
    std::uint64_t fn_id;
    if (m[1].size() != sizeof fn_id) throw error(errc::malformed_message, "malformed pool task");
    std::memcpy(&fn_id, m[1].data(), sizeof fn_id);
    auto items = unpack(m, 2, static_cast<std::size_t>(h->aux), false);
    auto* entry = find_function(fn_id);

    writer results;
    shared_objects chunk_objects;  // the master wrote the chunk's items with one writer
    for (auto& item : items) {
      results.forget_shared();  // the master reads each result on its own
      append_result(results, [&](writer& out) {
        if (!entry) throw error(errc::not_registered, "function id " + std::to_string(fn_id) + " is not registered in this worker");
        reader args(item.head, item.blobs);
        args.share_objects(chunk_objects);
        entry->invoke(args, out);
      });
    }
    if (auto over = message_limit_text("the results of a chunk", results.total_size(), rt->cfg().max_message_bytes,
                                       "use a smaller chunksize");
        !over.empty()) {
      // The master would drop the connection rather than take it: fail the chunk's items instead.
      results = writer();
      for (std::size_t i = 0; i < items.size(); ++i)
        append_failed_item(results, remote_failure::fiber_error(errc::message_too_large, over));
    }
    ++done;
    // Give the credit back unless this worker is about to retire.
    int give_back = (!maxtasks || granted < maxtasks) ? 1 : 0;
    granted += give_back;
    rt->worker().send_upstream(
        make_message(pool_kind::result, {.channel = pool_id, .request = h->request, .aux = static_cast<std::uint32_t>(give_back)}, results));
    if (maxtasks && done >= maxtasks) return;  // retire: the master starts a replacement
  }
}

}  // namespace fiber::detail
