#include "cli/master_restarts.hpp"

#include <sys/wait.h>

#include <csignal>
#include <cstring>

namespace fiber::cli {

bool master_restarts::again(int status, std::string& said) {
  if (!WIFSIGNALED(status)) return false;
  int sig = WTERMSIG(status);
  if (sig == SIGINT || sig == SIGTERM || left_ <= 0) return false;
  --left_;
  said = "the master died by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + "): starting it again to take " +
         "its run up from the journal (" + std::to_string(left_) + (left_ == 1 ? " restart" : " restarts") + " left)";
  return true;
}

}  // namespace fiber::cli
