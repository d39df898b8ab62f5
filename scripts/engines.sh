#!/usr/bin/env bash
# Starts or stops the engines the tests use: a Docker engine, two container registries, a two-node
# Slurm cluster, and Kubernetes: a real two-node cluster built from source
# (scripts/kubernetes_cluster.sh; its nodes pull from the test registry, so it comes after it),
# against which every Kubernetes suite runs, and the fault injector for what no real API server does
# on demand (tests/kubernetes/fault_injector.py; its pods are containers on the Docker engine).
#   start [ENGINE...]  installs and starts each engine (default: all) unless one answers already,
#                      recording the pid of what it started in build/engines/ENGINE.pid
#   stop [ENGINE...]   stops only what start started (default: all of it), by pid
# An engine that cannot be had makes `start` fail when engines are required (CI set, or
# FIBER_REQUIRE_ENGINES=1); otherwise it is reported and the tests that need it skip, saying why.
set -uo pipefail
cd "$(dirname "$0")/.."
state=build/engines
docker_sock=/var/run/docker.sock
all_engines=(docker registry slurm kubernetes)    # what `start` brings up by default: what the suite uses
known_engines=(docker registry slurm kubernetes)

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
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq docker.io >"$state/apt-docker.log" 2>&1 ||
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

# A Slurm cluster of its own: slurmctld on this host at 10.77.0.1 on a bridge, and two slurmd
# nodes, n1 and n2, each in a network namespace (its own address) and a UTS namespace (its own
# host name), sharing this host's file system as a cluster shares its home directories. munged
# is started unless one runs. Each node offers 4 CPUs (more than the machine has: Slurm counts slots,
# and the tests' two-node allocation of 2 per node leaves room for the batch-job tests running beside
# it). Clients find the cluster through SLURM_CONF=build/engines/slurm/slurm.conf.
# FIBER_SLURM_NODE_CPUS=N offers N slots per node instead: bench/compare/run.sh envelope measures
# 1,024 workers over both nodes on a cluster started with 512 (stop a running one first).
slurm_node_cpus=${FIBER_SLURM_NODE_CPUS:-4}
# Memory is a consumable resource and a job's --mem its limit: slurmstepd polls each step's
# resident memory every second and kills a step above it (OverMemoryKill; these nodes have no
# cgroup plugin). A job without --mem gets its share of a node's 2000 MB per CPU, so memory
# never packs nodes tighter than CPUs do. With hundreds of slots per node (the envelope
# benchmark) that share would be a few MB: there memory is neither counted nor limited.
if [ "$slurm_node_cpus" -le 16 ]; then
  slurm_memory="SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$((2000 / slurm_node_cpus))"
  slurm_accounting="JobAcctGatherType=jobacct_gather/linux
JobAcctGatherParams=OverMemoryKill
JobAcctGatherFrequency=task=1"
else
  slurm_memory="SelectTypeParameters=CR_Core"
  slurm_accounting="JobAcctGatherType=jobacct_gather/none"
fi
slurm_dir=$PWD/$state/slurm
slurm_conf=$slurm_dir/slurm.conf
slurm_up() { [ -f "$slurm_conf" ] && [ "$(SLURM_CONF=$slurm_conf sinfo -h -N -o %T 2>/dev/null | grep -c idle)" = 2 ]; }
# Once dockerd has run, FORWARD drops what crosses a bridge of ours: node to node.
allow_bridge_forwarding() {
  iptables -C FORWARD -i fiberbr0 -o fiberbr0 -j ACCEPT 2>/dev/null || iptables -I FORWARD -i fiberbr0 -o fiberbr0 -j ACCEPT 2>/dev/null
}
start_slurm() {
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    echo "engines: installing slurm-wlm munge"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq slurm-wlm munge >"$state/apt-slurm.log" 2>&1 ||
      { unavailable slurm "slurm-wlm could not be installed (see $state/apt-slurm.log)"; return; }
  fi
  # A cluster started before dockerd lost its FORWARD rule when dockerd set its own up.
  if slurm_up; then allow_bridge_forwarding; echo "engines: the test Slurm cluster already answers"; return; fi
  rm -rf "$slurm_dir/state" "$slurm_dir/spool"  # a fresh cluster: no jobs of an earlier run
  mkdir -p "$slurm_dir/state" "$slurm_dir/spool"
  cat >"$slurm_conf" <<CONF
ClusterName=fibertest
SlurmctldHost=$(hostname -s)(10.77.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MailProg=/bin/true
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/spool/%n
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd-%n.pid
SlurmctldLogFile=$slurm_dir/slurmctld.log
SlurmdLogFile=$slurm_dir/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
$slurm_memory
ReturnToService=2
MpiDefault=none
$slurm_accounting
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
NodeName=n1 NodeAddr=10.77.0.11 CPUs=$slurm_node_cpus RealMemory=2000 State=UNKNOWN
NodeName=n2 NodeAddr=10.77.0.12 CPUs=$slurm_node_cpus RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
CONF
  if ! ip link show fiberbr0 >/dev/null 2>&1; then
    ip link add fiberbr0 type bridge && ip addr add 10.77.0.1/24 dev fiberbr0 && ip link set fiberbr0 up ||
      { unavailable slurm "cannot make the bridge fiberbr0 (needs root and iproute2)"; return; }
    echo created >"$slurm_dir/network"
  fi
  for n in 1 2; do
    ip netns list | grep -qw "fibern$n" && continue
    ip netns add "fibern$n"
    ip link add "vfn$n" type veth peer name eth0 netns "fibern$n"
    ip link set "vfn$n" master fiberbr0 up
    ip -n "fibern$n" addr add "10.77.0.1$n/24" dev eth0
    ip -n "fibern$n" link set eth0 up
    ip -n "fibern$n" link set lo up
  done
  allow_bridge_forwarding
  if ! pgrep -x munged >/dev/null; then
    # Debian's package makes the key on install; a machine that lost it gets a new one.
    [ -f /etc/munge/munge.key ] || runuser -u munge -- mungekey -c
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged -F >"$slurm_dir/munged.log" 2>&1 &
    echo $! >"$state/munge.pid"
    for _ in $(seq 1 50); do [ -S /run/munge/munge.socket.2 ] && break; sleep 0.1; done
  fi
  SLURM_CONF=$slurm_conf slurmctld -D >"$slurm_dir/slurmctld.out" 2>&1 &
  echo $! >"$state/slurmctld.pid"
  for n in 1 2; do
    nsenter --net="/run/netns/fibern$n" unshare --uts sh -c "hostname n$n && exec env SLURM_CONF=$slurm_conf slurmd -D -N n$n" \
      >"$slurm_dir/slurmd-n$n.out" 2>&1 &
    echo $! >"$state/slurmd-n$n.pid"
  done
  for _ in $(seq 1 100); do slurm_up && break; sleep 0.2; done
  if slurm_up; then echo "engines: Slurm cluster up (nodes n1 n2; SLURM_CONF=$slurm_conf)"
  else unavailable slurm "the nodes did not become idle (see $slurm_dir/*.log)"; fi
}
stop_slurm() {
  for p in slurmd-n1 slurmd-n2 slurmctld munge; do stop_pid "$p"; done
  if [ -f "$slurm_dir/network" ]; then
    ip netns del fibern1 2>/dev/null; ip netns del fibern2 2>/dev/null; ip link del fiberbr0 2>/dev/null
    iptables -D FORWARD -i fiberbr0 -o fiberbr0 -j ACCEPT 2>/dev/null
    rm -f "$slurm_dir/network"
    echo "engines: Slurm network removed"
  fi
}

# The Kubernetes fault injector (an API server of the tests' own): HTTPS on a port of its own,
# pods on the Docker network kube-double (10.78.0.0/24). Its kubeconfig, tokens and CA are in
# build/engines/kubernetes.
kube_dir=$PWD/$state/kubernetes
start_kubernetes() {
  start_kubernetes_cluster
  start_kubernetes_fault_injector
}
stop_kubernetes() {
  scripts/kubernetes_cluster.sh stop
  stop_pid kubernetes
}
# The real cluster: its binaries are built from source once (tens of minutes cold) and cached
# outside the clone; then it starts in seconds. The tests find it in build/engines/k8s.
start_kubernetes_cluster() {
  [ -f "$registry_dir/address" ] || { unavailable kubernetes "the test cluster's nodes pull from the test registry, which is not up"; return; }
  docker_up || { unavailable kubernetes "the test cluster's images are built with Docker, which is not up"; return; }
  if scripts/kubernetes_cluster.sh start; then
    echo "engines: Kubernetes test cluster up ($("$(cat "$state/k8s/bin")/kubectl" --kubeconfig "$state/k8s/admin.kubeconfig" get --raw /version | tr -d ' \n'); KUBECONFIG=$state/k8s/admin.kubeconfig)"
  else
    unavailable kubernetes "the test cluster did not come up (see $state/k8s/logs)"
  fi
}
kube_up() { [ -f "$kube_dir/ready" ] && [ -f "$state/kubernetes.pid" ] && kill -0 "$(cat "$state/kubernetes.pid")" 2>/dev/null; }
start_kubernetes_fault_injector() {
  if kube_up; then echo "engines: the Kubernetes fault injector already runs"; return; fi
  docker_up || { unavailable kubernetes "the Kubernetes fault injector runs its pods on Docker, which is not up"; return; }
  rm -rf "$kube_dir"
  mkdir -p "$kube_dir"
  /usr/bin/python3 tests/kubernetes/fault_injector.py --state "$kube_dir" >"$state/kubernetes.log" 2>&1 &
  echo $! >"$state/kubernetes.pid"
  for _ in $(seq 1 100); do [ -f "$kube_dir/ready" ] && break; sleep 0.1; done
  if [ -f "$kube_dir/ready" ]; then echo "engines: Kubernetes fault injector up ($(cat "$kube_dir/url"); KUBECONFIG=$kube_dir/kubeconfig)"
  else
    stop_pid kubernetes
    unavailable kubernetes "the Kubernetes fault injector did not come up (see $state/kubernetes.log)"
  fi
}

# A container registry: Debian's docker-registry (distribution) on 127.0.0.1:5077, no auth,
# storage in build/engines/registry. The engine pushes to it without TLS (127.0.0.0/8 counts as
# an insecure registry); its address is in build/engines/registry/address.
registry_dir=$PWD/$state/registry
registry_address=127.0.0.1:5077
registry_up() { curl -s --max-time 2 "http://$registry_address/v2/" >/dev/null 2>&1; }
start_registry() {
  if registry_up; then
    echo "engines: a registry already answers on $registry_address"
    mkdir -p "$registry_dir"
    echo "$registry_address" >"$registry_dir/address"
    if curl -s --max-time 2 -o /dev/null "http://$auth_registry_address/v2/"; then
      echo "$auth_registry_address" >"$registry_dir/auth-address"
    else
      start_registry_with_auth
    fi
    return
  fi
  if ! command -v docker-registry >/dev/null; then
    echo "engines: installing docker-registry"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq docker-registry >"$state/apt-registry.log" 2>&1 ||
      { unavailable registry "docker-registry could not be installed (see $state/apt-registry.log)"; return; }
    # The package starts its own service with Debian's config (htpasswd auth): not ours.
    { systemctl stop docker-registry || service docker-registry stop || pkill -x docker-registry; } >/dev/null 2>&1
  fi
  rm -rf "$registry_dir"
  mkdir -p "$registry_dir/storage"
  cat >"$registry_dir/config.yml" <<CONF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $registry_dir/storage
  delete:
    enabled: true
http:
  addr: $registry_address
CONF
  docker-registry serve "$registry_dir/config.yml" >"$state/registry.log" 2>&1 &
  echo $! >"$state/registry.pid"
  for _ in $(seq 1 100); do registry_up && break; sleep 0.1; done
  if registry_up; then
    echo "$registry_address" >"$registry_dir/address"
    echo "engines: registry up ($registry_address, pid $(cat "$state/registry.pid"))"
  else
    stop_pid registry
    unavailable registry "docker-registry did not come up (see $state/registry.log)"
    return
  fi
  start_registry_with_auth
}

# A second one that wants credentials (htpasswd: user fiber, password fiber-test-secret; the
# bcrypt hash below is of that test password), for the tests of refused and accepted logins. Its
# address is in build/engines/registry/auth-address.
auth_registry_address=127.0.0.1:5078
start_registry_with_auth() {
  local dir=$registry_dir/auth
  mkdir -p "$dir/storage"
  echo 'fiber:$2y$05$oLG.0VbYXJfGgxj1A28g6eI0oZ96CHlNqklr2YWX3fIhG7O38lzKC' >"$dir/htpasswd"
  cat >"$dir/config.yml" <<CONF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/storage
auth:
  htpasswd:
    realm: fiber-test
    path: $dir/htpasswd
http:
  addr: $auth_registry_address
CONF
  docker-registry serve "$dir/config.yml" >"$state/registry-auth.log" 2>&1 &
  echo $! >"$state/registry-auth.pid"
  # It answers 401 to an anonymous /v2/: up.
  for _ in $(seq 1 100); do curl -s --max-time 2 -o /dev/null "http://$auth_registry_address/v2/" && break; sleep 0.1; done
  if curl -s --max-time 2 -o /dev/null "http://$auth_registry_address/v2/"; then
    echo "$auth_registry_address" >"$registry_dir/auth-address"
    echo "engines: registry with logins up ($auth_registry_address, pid $(cat "$state/registry-auth.pid"))"
  else
    stop_pid registry-auth
    unavailable registry "docker-registry with htpasswd did not come up (see $state/registry-auth.log)"
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
        slurm) start_slurm ;;
        kubernetes) start_kubernetes ;;
        registry) start_registry ;;
        *) echo "engines: unknown engine '$e' (known: ${known_engines[*]})" >&2; exit 2 ;;
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
    ((${#engines[@]})) || engines=(kubernetes registry slurm docker)  # the fault injector's pods are Docker's: it goes first
    for e in "${engines[@]}"; do
      case "$e" in
        slurm) stop_slurm ;;
        kubernetes) stop_kubernetes ;;
        registry) stop_pid registry-auth; stop_pid registry ;;
        *) stop_pid "$e" ;;
      esac
    done
    ;;
  *) echo "usage: $0 start [ENGINE...] | stop [ENGINE...]" >&2; exit 2 ;;
esac
