/* The test cluster's sandbox ("pause") program: PID 1 of every pod, which holds the pod's
 * namespaces while its containers come and go. It sleeps until SIGTERM or SIGINT ends it, and reaps
 * any child that is handed to it as PID 1. Built static into an image of one file
 * (scripts/engines.sh), since the test cluster pulls nothing from the internet. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { _exit(sig == SIGTERM ? 0 : 2); }

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, 0, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction end = {.sa_handler = stop};
  struct sigaction child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGTERM, &end, 0) || sigaction(SIGINT, &end, 0) || sigaction(SIGCHLD, &child, 0)) return 1;
  for (;;) pause();
}
