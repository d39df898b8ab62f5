// Boost.JSON's compiled part, built into fiber where the system's libboost_json cannot be linked:
// a build against libc++ (Debian's library is built against libstdc++, whose std::string it uses).
#include <boost/json/src.hpp>
