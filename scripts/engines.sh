#!/usr/bin/env bash
# Starts or stops the real engines the tests use: a Docker engine for now (Slurm, the registry
# and the Kubernetes double join as their backends land).
#   start [ENGINE...]  installs and starts each engine (default: all) unless one answers already,
#                      recording the pid of what it started in build/engines/ENGINE.pid
#   stop [ENGINE...]   stops only what start started (default: all of it), by pid
# An engine that cannot be had makes `start` fail when engines are required (CI set, or
# FIBER_REQUIRE_ENGINES=1); otherwise it is reported and the tests that need it skip, saying why.
set -uo pipefail
cd "$(dirname "$0")/.."
state=build/engines
docker_sock=/var/run/docker.sock
all_engines=(docker)

required() {
  local v=${FIBER_REQUIRE_ENGINES-${CI-}}
  [ -n "$v" ] && [ "$v" != 0 ] && [ "$v" != false ]
}
missing=()
unavailable() {  # engine, why
  missing+=("$1")
  echo "engines: $1 cannot be had: $2" >&2
}

docker_up() { curl -s --max-time 2 --unix-socket "$docker_sock" http://localhost/_ping 2>/dev/null | grep -q OK; }
start_docker() {
  if docker_up; then echo "engines: a Docker engine already answers on $docker_sock"; return; fi
  if ! command -v dockerd >/dev/null; then
    echo "engines: installing docker.io"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >"$state/apt-docker.log" 2>&1 ||
      { unavailable docker "docker.io could not be installed (see $state/apt-docker.log)"; return; }
  fi
  dockerd >"$state/dockerd.log" 2>&1 &
  echo $! >"$state/docker.pid"
  for _ in $(seq 1 150); do docker_up && break; sleep 0.1; done
  if docker_up; then echo "engines: dockerd started (pid $(cat "$state/docker.pid"))"
  else
    kill "$(cat "$state/docker.pid")" 2>/dev/null
    rm -f "$state/docker.pid"
    unavailable docker "dockerd did not come up (see $state/dockerd.log)"
  fi
}

stop_pid() {  # engine
  local file="$state/$1.pid" pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  kill "$pid" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
  rm -f "$file"
  echo "engines: $1 stopped (pid $pid)"
}

case "${1:-}" in
  start)
    shift
    mkdir -p "$state"
    engines=("$@")
    ((${#engines[@]})) || engines=("${all_engines[@]}")
    for e in "${engines[@]}"; do
      case "$e" in
        docker) start_docker ;;
        *) echo "engines: unknown engine '$e' (known: ${all_engines[*]})" >&2; exit 2 ;;
      esac
    done
    if ((${#missing[@]})); then
      if required; then
        echo "engines: required (CI or FIBER_REQUIRE_ENGINES=1) but missing: ${missing[*]}" >&2
        exit 1
      fi
      echo "engines: missing ${missing[*]}: the tests that need them will skip (FIBER_REQUIRE_ENGINES=1 makes this fatal)"
    fi
    ;;
  stop)
    shift
    engines=("$@")
    ((${#engines[@]})) || engines=("${all_engines[@]}")
    for e in "${engines[@]}"; do stop_pid "$e"; done
    ;;
  *) echo "usage: $0 start [ENGINE...] | stop [ENGINE...]" >&2; exit 2 ;;
esac
