#!/usr/bin/env bash
# Starts (start) or stops (stop) the real engines the tests use: a Docker engine for now.
# start: installs docker.io when missing, starts dockerd unless one answers already, and records
# its pid in build/engines/dockerd.pid; stop: stops only what start started, by pid.
# An engine that cannot be had is reported, not fatal: its tests then skip.
set -uo pipefail
cd "$(dirname "$0")/.."
state=build/engines
sock=/var/run/docker.sock

docker_up() { curl -s --max-time 2 --unix-socket "$sock" http://localhost/_ping 2>/dev/null | grep -q OK; }

case "${1:-}" in
  start)
    mkdir -p "$state"
    if docker_up; then echo "engines: a Docker engine already answers on $sock"; exit 0; fi
    if ! command -v dockerd >/dev/null; then
      echo "engines: installing docker.io"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >"$state/apt.log" 2>&1 ||
        { echo "engines: docker.io could not be installed (see $state/apt.log); Docker tests will skip"; exit 0; }
    fi
    dockerd >"$state/dockerd.log" 2>&1 &
    echo $! >"$state/dockerd.pid"
    for _ in $(seq 1 100); do docker_up && break; sleep 0.1; done
    if docker_up; then echo "engines: dockerd started (pid $(cat "$state/dockerd.pid"))"
    else echo "engines: dockerd did not come up (see $state/dockerd.log); Docker tests will skip"; fi
    ;;
  stop)
    if [ -f "$state/dockerd.pid" ]; then
      pid=$(cat "$state/dockerd.pid")
      kill "$pid" 2>/dev/null
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null
      rm -f "$state/dockerd.pid"
      echo "engines: dockerd stopped"
    fi
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
