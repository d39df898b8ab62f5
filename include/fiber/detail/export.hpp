// What a program sees of fiber built as a shared library: the library is compiled with its symbols
// hidden (-fvisibility=hidden), and the names the public headers reach are marked FIBER_API, so a
// program links to those alone and the library's inner parts stay its own. A static library
// changes nothing.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define FIBER_API __attribute__((visibility("default")))
#else
#define FIBER_API
#endif
