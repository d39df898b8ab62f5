// libcurl, loaded when the first HTTP client is made rather than when the program starts.
// Only a master that talks to an engine's API (Docker, Kubernetes, Slurm's REST API) makes HTTP
// calls; a worker never does. Linked, libcurl and the twenty libraries it brings (LDAP, SSH,
// RTMP, GnuTLS, ...) would be mapped into every process of the job: about a hundred more memory
// areas that each forked child copies and each exiting child unmaps, a tenth of a local child's
// start and end. Loaded here, a program that never makes an HTTP call never maps them.
#pragma once
#include <curl/curl.h>

#include <string>

namespace fiber::detail {

/// The libcurl functions fiber calls, resolved from the loaded library.
struct curl_library {
  decltype(&::curl_global_init) global_init;
  decltype(&::curl_easy_init) easy_init;
  decltype(&::curl_easy_setopt) easy_setopt;
  decltype(&::curl_easy_getinfo) easy_getinfo;
  decltype(&::curl_easy_cleanup) easy_cleanup;
  decltype(&::curl_easy_strerror) easy_strerror;
  decltype(&::curl_multi_init) multi_init;
  decltype(&::curl_multi_setopt) multi_setopt;
  decltype(&::curl_multi_add_handle) multi_add_handle;
  decltype(&::curl_multi_remove_handle) multi_remove_handle;
  decltype(&::curl_multi_socket_action) multi_socket_action;
  decltype(&::curl_multi_info_read) multi_info_read;
  decltype(&::curl_multi_cleanup) multi_cleanup;
  decltype(&::curl_multi_strerror) multi_strerror;
  decltype(&::curl_slist_append) slist_append;
  decltype(&::curl_slist_free_all) slist_free_all;
};

/// The library, loaded and initialized (curl_global_init) on the first call, from any thread;
/// never unloaded. fiber::error(backend_unavailable) naming the library and how to install it
/// when it cannot be loaded or lacks a function.
const curl_library& curl();

/// The file the loaded libcurl was loaded from (loading it as curl() does): a program's image must
/// hold it and what it links, which the program's own list of libraries does not name.
std::string curl_file();

}  // namespace fiber::detail
