#!/usr/bin/env bash
# A real Kubernetes cluster on this machine, for the tests: etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler on this host, and two nodes, k1 and k2, each a network
# namespace of its own (like the Slurm nodes) running containerd, the kubelet and kube-proxy.
# The binaries are built from source once and cached (scripts/kubernetes_build.sh).
#   start  brings it up (unless it answers already) and waits for both nodes to be Ready
#   stop   stops every process it started, by pid, and removes the pods' processes, its mounts,
#          cgroups, network namespaces, bridge and firewall rules
#   restart-apiserver, compact-etcd, kill-container NODE ID   faults for the tests (see below)
# Addresses, all on this machine; nothing routes off it:
#   bridge fiberk8s0 10.79.0.1/24 (the API server's address), nodes 10.79.0.11 and .12,
#   pods 10.80.1.0/24 on k1 and 10.80.2.0/24 on k2, services 10.96.0.0/24.
# The nodes pull images from the test registry (127.0.0.1:5077 on this host) as a node pulls from
# any registry: containerd maps that name to the registry's forwarder on the bridge.
# State: build/engines/k8s (kubeconfigs, logs, certificates); node roots under
# /var/lib/fiber-kubernetes. Clients: KUBECONFIG=build/engines/k8s/admin.kubeconfig.
set -uo pipefail
cd "$(dirname "$0")/.."
state=$PWD/build/engines
dir=$state/k8s
pki=$dir/pki
nodes_root=/var/lib/fiber-kubernetes
bridge=fiberk8s0
host_ip=10.79.0.1
api=https://$host_ip:6443
service_range=10.96.0.0/24
pod_range=10.80.0.0/16
registry_port=5077
node_names=(k1 k2)
say() { echo "kubernetes: $*" >&2; }
node_ip() { echo "10.79.0.1${1#k}"; }
node_pods() { echo "10.80.${1#k}.0/24"; }

pidfile() { echo "$dir/pids/$1.pid"; }
spawn() {  # name, command...: started in the background, its pid recorded, its output in logs/
  local name=$1; shift
  "$@" >"$dir/logs/$name.log" 2>&1 &
  echo $! >"$(pidfile "$name")"
}
exec_in_node() {  # node, command...: becomes the command, inside the node's network namespace (for spawn)
  local n=$1; shift
  exec nsenter --net="/run/netns/fiber$n" "$@"
}
stop_pid() {
  local f pid
  f=$(pidfile "$1")
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
  rm -f "$f"
}
kubectl_() { "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" "$@"; }
api_up() { [ -f "$dir/admin.kubeconfig" ] && [ -x "${bin:-/nonexistent}/kubectl" ] && kubectl_ get --raw /readyz >/dev/null 2>&1; }
ready_nodes() { kubectl_ get nodes --no-headers 2>/dev/null | awk '$2 == "Ready"' | wc -l; }
all_ready() { [ "$(ready_nodes)" = "${#node_names[@]}" ]; }
wait_for() {  # tries (0.2 s each), what, command...
  local tries=$1 what=$2; shift 2
  for _ in $(seq 1 "$tries"); do "$@" && return 0; sleep 0.2; done
  say "$what did not happen (logs: $dir/logs)"
  return 1
}

# --- certificates -------------------------------------------------------------------------------
cert() {  # name, subject, extensions: a key and a certificate signed by the cluster's CA
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/$1.key" \
    -subj "$2" -out "$pki/$1.csr" 2>/dev/null &&
    openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 3650 \
      -extfile <(printf '%s\n' "$3") -out "$pki/$1.crt" 2>/dev/null
}
kubeconfig() {  # file, user (a certificate in pki/)
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: fiber-test
  cluster: {server: "$api", certificate-authority: "$pki/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$pki/$2.crt", client-key: "$pki/$2.key"}
contexts:
- name: fiber-test
  context: {cluster: fiber-test, user: $2, namespace: default}
current-context: fiber-test
EOF
}
make_pki() {
  mkdir -p "$pki"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 -subj "/CN=fiber-test-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null || return 1
  local client="extendedKeyUsage=clientAuth"
  cert apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth
subjectAltName=IP:$host_ip,IP:10.96.0.1,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" &&
    cert admin "/O=system:masters/CN=fiber-test-admin" "$client" &&
    cert apiserver-kubelet "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client" &&
    cert controller-manager "/CN=system:kube-controller-manager" "$client" &&
    cert scheduler "/CN=system:kube-scheduler" "$client" &&
    cert proxy "/CN=system:kube-proxy" "$client" || return 1
  for n in "${node_names[@]}"; do
    cert "kubelet-$n" "/O=system:nodes/CN=system:node:$n" "$client" || return 1
  done
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/sa.key" 2>/dev/null &&
    openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null || return 1
  for u in admin controller-manager scheduler proxy; do kubeconfig "$dir/$u.kubeconfig" "$u"; done
  for n in "${node_names[@]}"; do kubeconfig "$dir/kubelet-$n.kubeconfig" "kubelet-$n"; done
}

# --- network ------------------------------------------------------------------------------------
make_network() {
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge && ip addr add "$host_ip/24" dev "$bridge" && ip link set "$bridge" up || return 1
  fi
  for n in "${node_names[@]}"; do
    ip netns list | grep -qw "fiber$n" || {
      ip netns add "fiber$n" &&
        ip link add "vk$n" type veth peer name eth0 netns "fiber$n" &&
        ip link set "vk$n" master "$bridge" up &&
        ip -n "fiber$n" addr add "$(node_ip "$n")/24" dev eth0 &&
        ip -n "fiber$n" link set eth0 up && ip -n "fiber$n" link set lo up
    } || return 1
    # No default route on a node: pods reach this host, the other node's pods and the services,
    # and nothing else.
    ip -n "fiber$n" route replace "$pod_range" via "$host_ip"
    ip -n "fiber$n" route replace blackhole "$service_range"
    ip netns exec "fiber$n" sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 2>/dev/null ||
      ip netns exec "fiber$n" sysctl -qw net.ipv4.ip_forward=1
    ip route replace "$(node_pods "$n")" via "$(node_ip "$n")"
  done
  ip route replace blackhole "$service_range"
  sysctl -qw net.ipv4.ip_forward=1
  # Between the nodes through this host, and never on from the bridge to anywhere else (dockerd's
  # FORWARD policy drops what crosses a bridge of ours otherwise).
  iptables -C FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null || iptables -I FORWARD -i "$bridge" -o "$bridge" -j ACCEPT
  iptables -C FORWARD -i "$bridge" ! -o "$bridge" -j DROP 2>/dev/null || iptables -A FORWARD -i "$bridge" ! -o "$bridge" -j DROP
}
remove_network() {
  for n in "${node_names[@]}"; do
    ip route del "$(node_pods "$n")" 2>/dev/null
    ip netns del "fiber$n" 2>/dev/null
  done
  ip route del blackhole "$service_range" 2>/dev/null
  ip link del "$bridge" 2>/dev/null
  iptables -D FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null
  iptables -D FORWARD -i "$bridge" ! -o "$bridge" -j DROP 2>/dev/null
}

# --- the sandbox image --------------------------------------------------------------------------
# The pods' sandbox ("pause") image, built here from containers/kubernetes/pause and pushed to the
# test registry, from which the nodes pull it as they would from any registry.
pause_image=127.0.0.1:$registry_port/fiber-test/pause:1
push_pause() {
  curl -sf "http://127.0.0.1:$registry_port/v2/fiber-test/pause/manifests/1" \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' >/dev/null && return 0
  local ctx=$dir/pause-image
  mkdir -p "$ctx"
  gcc -Os -static -Wall -Werror -o "$ctx/pause" containers/kubernetes/pause/pause.c || return 1
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/Dockerfile"
  docker build -q -t "$pause_image" "$ctx" >/dev/null && docker push -q "$pause_image" >/dev/null
}

# The suites' image: an empty root whose /usr, /tmp and build folder come from this host through
# hostPath volumes (the nodes share this host's file system), as the Docker suites' containers
# get them through bind mounts.
root_image=127.0.0.1:$registry_port/fiber-test/root:1
push_root_image() {
  curl -sf "http://127.0.0.1:$registry_port/v2/fiber-test/root/manifests/1" \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' >/dev/null && return 0
  local ctx=$dir/root-image
  mkdir -p "$ctx/root"
  (cd "$ctx/root" && mkdir -p usr etc tmp proc dev sys sbin && ln -sfn usr/lib lib && ln -sfn usr/lib64 lib64 && ln -sfn usr/bin bin)
  printf 'FROM scratch\nCOPY root/ /\n' >"$ctx/Dockerfile"
  docker build -q -t "$root_image" "$ctx" >/dev/null && docker push -q "$root_image" >/dev/null
}

# A kubeconfig for a service account. JSON, which is YAML too: the tests edit it with a JSON
# parser. Its token is read from its file at each use, so a test can rewrite it under a client.
token_kubeconfig() {  # file, user, token file
  cat >"$1" <<EOF
{"apiVersion": "v1", "kind": "Config",
 "clusters": [{"name": "fiber-test", "cluster": {"server": "$api", "certificate-authority": "$pki/ca.crt"}}],
 "users": [{"name": "$2", "user": {"tokenFile": "$3"}}],
 "contexts": [{"name": "fiber-test", "context": {"cluster": "fiber-test", "user": "$2", "namespace": "default"}}],
 "current-context": "fiber-test"}
EOF
}
# What the tests use, in the files the suites read (tests/kubernetes_support.hpp): a kubeconfig
# for the service account fiber (its Role is containers/kubernetes/rbac.yaml, nothing more);
# command.kubeconfig for the service account fiber-user with the Role fiber-command and nothing
# more (the `fiber` command's tests); an admin token for the tests' own setup; the address pods
# reach this host at; the suites' image.
write_test_access() {
  kubectl_ apply -f - >>"$dir/logs/rbac.log" 2>&1 <<EOF || return 1
apiVersion: v1
kind: ServiceAccount
metadata: {name: fiber-test-admin, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: fiber-test-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: fiber-test-admin, namespace: kube-system}]
EOF
  # The people who run the `fiber` command: the Role fiber-command of rbac.yaml, bound to a
  # service account of their own (on a real cluster a user or a group would be bound).
  kubectl_ apply -f - >>"$dir/logs/rbac.log" 2>&1 <<EOF || return 1
apiVersion: v1
kind: ServiceAccount
metadata: {name: fiber-user, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: fiber-command, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: fiber-command}
subjects: [{kind: ServiceAccount, name: fiber-user, namespace: default}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: fiber-command-nodes}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: fiber-nodes}
subjects: [{kind: ServiceAccount, name: fiber-user, namespace: default}]
EOF
  kubectl_ create token fiber-test-admin -n kube-system --duration=48h >"$dir/admin-token" &&
    kubectl_ create token fiber -n default --duration=48h >"$dir/token" &&
    kubectl_ create token fiber-user -n default --duration=48h >"$dir/command-token" || return 1
  token_kubeconfig "$dir/kubeconfig" fiber "$dir/token"
  token_kubeconfig "$dir/command.kubeconfig" fiber-user "$dir/command-token"
  cp "$pki/ca.crt" "$dir/ca.crt"
  printf '%s' "$host_ip" >"$dir/gateway"
  printf '%s' "$api" >"$dir/url"
  printf '%s' "$root_image" >"$dir/image"
}

# --- control plane ------------------------------------------------------------------------------
start_apiserver() {
  spawn kube-apiserver "$bin/kube-apiserver" --etcd-servers=http://127.0.0.1:23790 \
    --bind-address="$host_ip" --advertise-address="$host_ip" --secure-port=6443 \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" --client-ca-file="$pki/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$pki/sa.pub" \
    --service-account-signing-key-file="$pki/sa.key" --service-cluster-ip-range="$service_range" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction --allow-privileged=true \
    --kubelet-client-certificate="$pki/apiserver-kubelet.crt" --kubelet-client-key="$pki/apiserver-kubelet.key" \
    --kubelet-preferred-address-types=InternalIP --profiling=false \
    --audit-policy-file="$dir/audit-policy.yaml" --audit-log-path="$dir/audit.log" --audit-log-format=json \
    --audit-log-maxsize=200 --audit-log-maxbackup=1
  wait_for 300 "the API server answering /readyz" api_up
}

# For the fault tests (tests/kubernetes_cluster_test.cpp, run alone): the API server stopped and
# started again under running clients, and etcd's history compacted up to now, so that a watch that
# reconnects from before it is answered 410 Gone, as after any long outage on a real cluster.
restart_apiserver() {
  bin=$(cat "$dir/bin" 2>/dev/null) && [ -f "$(pidfile kube-apiserver)" ] || { say "the test cluster is not running"; return 1; }
  stop_pid kube-apiserver
  start_apiserver
}
compact_etcd() {
  local rev
  rev=$(curl -sf -X POST http://127.0.0.1:23790/v3/kv/range -d '{"key":"AA=="}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])') || { say "etcd did not answer"; return 1; }
  curl -sf -X POST http://127.0.0.1:23790/v3/kv/compaction -d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null &&
    echo "$rev"
}

# ... and a pod's container killed with SIGKILL by its node's containerd, as a crash or the OOM
# killer would end it: the kubelet sees it end (the fiber command's test of gc after a killed master).
kill_container() {  # node, container id as the pod's status gives it (containerd://ID)
  bin=$(cat "$dir/bin" 2>/dev/null) || { say "the test cluster is not running"; return 1; }
  [ -S "/run/fiber-kubernetes/$1.sock" ] || { say "no node named '$1'"; return 1; }
  "$bin/ctr" --address "/run/fiber-kubernetes/$1.sock" -n k8s.io task kill -s SIGKILL "${2#containerd://}"
}

start_control_plane() {
  mkdir -p "$dir/etcd"
  # Every request, one JSON line each (who, verb, resource, namespace, code), in audit.log: what a
  # test or a benchmark counts of what the backend asked the API server. The nodes' own heartbeat
  # (leases) and events are left out.
  cat >"$dir/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}, {group: "", resources: [events]}]
- level: Metadata
EOF
  spawn etcd "$bin/etcd" --name fiber-test --data-dir "$dir/etcd" --log-level warn --unsafe-no-fsync \
    --listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 \
    --listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
    --initial-cluster fiber-test=http://127.0.0.1:23800 --listen-metrics-urls http://127.0.0.1:23810
  wait_for 100 "etcd answering" curl -sf -o /dev/null http://127.0.0.1:23790/health || return 1
  start_apiserver || return 1
  # A node whose lease is older than the grace period is marked unreachable, and tainted so that no
  # pod goes there: after the fault tests' API server restart (restart-apiserver), on a loaded
  # machine, both nodes were for a while, and the tests beside them failed to schedule. The nodes
  # here never go away by themselves; 10 minutes outlasts any restart.
  spawn kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$dir/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$dir/controller-manager.kubeconfig" --authorization-kubeconfig="$dir/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
    --service-cluster-ip-range="$service_range" --enable-hostpath-provisioner=true --profiling=false \
    --node-monitor-grace-period=10m
  spawn kube-scheduler "$bin/kube-scheduler" --kubeconfig="$dir/scheduler.kubeconfig" \
    --authentication-kubeconfig="$dir/scheduler.kubeconfig" --authorization-kubeconfig="$dir/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false
}

# --- nodes --------------------------------------------------------------------------------------
start_node() {  # node
  local n=$1 nd=$nodes_root/$1 ip
  ip=$(node_ip "$n")
  mkdir -p "$nd/cni" "$nd/kubelet" "$nd/containerd" "$nd/logs" "$dir/certs.d/127.0.0.1:$registry_port"
  # The test registry by the name the tests push to, reached through its forwarder on the bridge.
  cat >"$dir/certs.d/127.0.0.1:$registry_port/hosts.toml" <<EOF
server = "http://127.0.0.1:$registry_port"
[host."http://$host_ip:$registry_port"]
  capabilities = ["pull", "resolve"]
EOF
  cat >"$nd/cni/10-pods.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "pods-$n", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$nd/ipam", "ranges": [[{"subnet": "$(node_pods "$n")"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
  cat >"$nd/containerd.toml" <<EOF
version = 3
root = "$nd/containerd/root"
state = "/run/fiber-kubernetes/$n"
[grpc]
  address = "/run/fiber-kubernetes/$n.sock"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$pause_image"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "$dir/certs.d"
[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  # The kubelet asks for -998 for a pod's sandbox; lowering a score needs CAP_SYS_RESOURCE, which
  # these machines' root lacks (runc then fails with "can't get final child's PID"). containerd
  # keeps every score at or above its own, as it does for rootless nodes.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$nd/cni"
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
    SystemdCgroup = false
    BinaryName = "/usr/sbin/runc"
    Root = "/run/fiber-kubernetes/$n/runc"
EOF
  cat >"$dir/resolv.conf" <<EOF
# The test cluster has no DNS server, and its pods ask none off this machine.
nameserver 127.0.0.1
EOF
  cat >"$nd/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
cgroupDriver: cgroupfs
cgroupRoot: /fiber-$n
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix:///run/fiber-kubernetes/$n.sock
podLogsDir: $nd/logs
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: "$pki/ca.crt"}}
authorization: {mode: Webhook}
readOnlyPort: 0
resolvConf: $dir/resolv.conf
serializeImagePulls: false
protectKernelDefaults: false
# No eviction: the nodes share this machine's memory and disk with the tests, the builds and the
# other engines, and a pressure condition taints a node (no pod goes there) for 5 minutes after it
# passes. "0%" turns a signal off; signals not named are off too.
evictionHard: {memory.available: "0%", nodefs.available: "0%", imagefs.available: "0%", nodefs.inodesFree: "0%"}
imageGCHighThresholdPercent: 100
EOF
  # The node's cgroup root, in every hierarchy (the kubelet makes its pods' cgroups below it; a
  # cpuset cgroup of v1 starts empty and takes its parent's CPUs and memory nodes).
  for ctrl in /sys/fs/cgroup/*/; do
    [ -f "$ctrl/cgroup.procs" ] || continue
    mkdir -p "$ctrl/fiber-$n" || return 1
  done
  if [ -d /sys/fs/cgroup/cpuset/fiber-$n ]; then
    cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/fiber-$n/cpuset.cpus"
    cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/fiber-$n/cpuset.mems"
  fi
  mkdir -p /run/fiber-kubernetes
  # Its shim is found on PATH: this build's, not the one of Docker's containerd.
  PATH=$bin:$PATH spawn "containerd-$n" exec_in_node "$n" "$bin/containerd" --config "$nd/containerd.toml"
  wait_for 100 "containerd of $n answering" test -S "/run/fiber-kubernetes/$n.sock" || return 1
  spawn "kubelet-$n" exec_in_node "$n" "$bin/kubelet" --config "$nd/kubelet.yaml" --kubeconfig "$dir/kubelet-$n.kubeconfig" \
    --root-dir "$nd/kubelet" --cert-dir "$nd/kubelet/pki" --hostname-override "$n" --node-ip "$ip"
  cat >"$nd/proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: "$dir/proxy.kubeconfig"}
hostnameOverride: $n
bindAddress: $ip
clusterCIDR: $pod_range
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  spawn "kube-proxy-$n" exec_in_node "$n" "$bin/kube-proxy" --config "$nd/proxy.yaml"
}

# The kernel settings a kubelet sets on its machine (vm.overcommit_memory=1, kernel.panic=10,
# kernel.panic_on_oops=1, ...): kept at start, put back at stop, so the machine is as it was.
kubelet_sysctls=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
                 kernel.keys.root_maxbytes)
save_sysctls() { sysctl -e "${kubelet_sysctls[@]}" 2>/dev/null | sed 's/ = /=/' >"$dir/sysctl.saved"; }
restore_sysctls() {
  [ -f "$dir/sysctl.saved" ] || return 0
  while read -r kv; do sysctl -qw "$kv" 2>/dev/null; done <"$dir/sysctl.saved"
  rm -f "$dir/sysctl.saved"
}

start_forwarder() {  # the test registry on the bridge, for the nodes
  spawn registry-forwarder socat "TCP-LISTEN:$registry_port,bind=$host_ip,fork,reuseaddr" "TCP:127.0.0.1:$registry_port"
}

start() {
  bin=$(scripts/kubernetes_build.sh) || { say "its binaries could not be built"; return 1; }
  if api_up && all_ready; then say "the test cluster already answers"; return 0; fi
  stop >/dev/null 2>&1
  rm -rf "$dir" && mkdir -p "$dir/pids" "$dir/logs"
  for tool in socat conntrack /usr/lib/cni/bridge /usr/sbin/runc iptables; do
    command -v "$tool" >/dev/null || [ -x "$tool" ] || {
      say "installing socat conntrack containernetworking-plugins runc iptables"
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq socat conntrack containernetworking-plugins runc iptables \
        >"$dir/logs/apt.log" 2>&1 || { say "could not install them (see $dir/logs/apt.log)"; return 1; }
      break
    }
  done
  save_sysctls
  make_pki || { say "could not make its certificates"; return 1; }
  make_network || { say "could not make its network (needs root and iproute2)"; return 1; }
  push_pause && push_root_image || { say "could not build and push its images (needs Docker and the test registry)"; return 1; }
  start_forwarder
  start_control_plane || return 1
  for n in "${node_names[@]}"; do start_node "$n" || return 1; done
  wait_for 600 "both nodes Ready" all_ready || return 1
  kubectl_ apply -f containers/kubernetes/rbac.yaml >"$dir/logs/rbac.log" 2>&1 || { say "rbac.yaml was refused (see $dir/logs/rbac.log)"; return 1; }
  kubectl_ apply -f - >>"$dir/logs/rbac.log" 2>&1 <<EOF || return 1
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/host-path
EOF
  # Ready for pods once the controllers have made namespace default's service account.
  wait_for 300 "the service account default/default" kubectl_ get serviceaccount default -o name >/dev/null 2>&1 || return 1
  write_test_access || { say "could not write the tests' access (see $dir/logs/rbac.log)"; return 1; }
  echo "$bin" >"$dir/bin"
  touch "$dir/ready"
  say "up: $("$bin/kubectl" version --kubeconfig "$dir/admin.kubeconfig" 2>/dev/null | tr '\n' ' ')"
}

# Every process a node ran: containerd's shims and the pods' processes, found by the cgroups and
# parents they have, then the node's mounts and cgroups.
stop_node() {  # node
  local n=$1 nd=$nodes_root/$1 pids
  stop_pid "kube-proxy-$n"
  stop_pid "kubelet-$n"
  # The pods' processes live in the node's cgroups; the shims are containerd's children that
  # outlive it (re-parented), found by their socket's namespace in their command line.
  for c in /sys/fs/cgroup/freezer/fiber-$n; do
    [ -d "$c" ] || continue
    pids=$(find "$c" -name cgroup.procs -exec cat {} + 2>/dev/null)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
  done
  pids=$(pgrep -f "containerd-shim-runc-v2 .*-address /run/fiber-kubernetes/$n.sock")
  [ -n "$pids" ] && kill -9 $pids 2>/dev/null
  stop_pid "containerd-$n"
  # Mounts under the node's folders and state (overlays, the pods' volumes and network namespaces).
  for root in "$nd" "/run/fiber-kubernetes/$n"; do
    findmnt -rn -o TARGET | grep "^$root/" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
  done
  for ctrl in /sys/fs/cgroup/*/; do
    [ -d "$ctrl/fiber-$n" ] && find "$ctrl/fiber-$n" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  rm -rf "/run/fiber-kubernetes/$n" "/run/fiber-kubernetes/$n.sock"
}
stop() {
  [ -d "$dir/pids" ] || { remove_network; return 0; }
  for n in "${node_names[@]}"; do stop_node "$n"; done
  for p in kube-scheduler kube-controller-manager kube-apiserver etcd registry-forwarder; do stop_pid "$p"; done
  restore_sysctls
  remove_network
  say "stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  restart-apiserver) restart_apiserver ;;
  compact-etcd) compact_etcd ;;
  kill-container) kill_container "${2:-}" "${3:-}" ;;
  *) echo "usage: $0 start | stop | restart-apiserver | compact-etcd | kill-container NODE CONTAINER_ID" >&2; exit 2 ;;
esac
