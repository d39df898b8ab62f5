#!/usr/bin/env bash
# Builds the binaries of the test Kubernetes cluster from source, through the Go module proxy,
# once per version, into a cache folder outside the clone; prints the folder that holds them.
#   kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl  (k8s.io/kubernetes)
#   etcd etcdctl                                                                     (go.etcd.io/etcd)
#   containerd containerd-shim-runc-v2 ctr                                           (containerd v2)
# A warm run (all present) prints the folder at once. The Go module and build caches live beside
# the binaries while it builds, so a build that was cut short goes on where it stopped; they are
# dropped once all the binaries are there.
# Cache: FIBER_CACHE, else $XDG_CACHE_HOME/fiber, else ~/.cache/fiber. Progress goes to stderr.
set -euo pipefail

# 1.36: a supported minor whose kubelet still runs on cgroup v1 when told to (failCgroupV1: false),
# the only cgroups these machines have. containerd 2.3 is in the range containerd recommends for it.
kube_version=1.36.3
etcd_version=3.6.16
containerd_version=2.3.7

cache=${FIBER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fiber}
dest=$cache/kubernetes-$kube_version
bin=$dest/bin
say() { echo "kubernetes build: $*" >&2; }

wanted=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl etcd etcdctl
        containerd containerd-shim-runc-v2 ctr)
complete() { for b in "${wanted[@]}"; do [ -x "$bin/$b" ] || return 1; done; }
if complete; then echo "$bin"; exit 0; fi

command -v go >/dev/null || { say "needs Go (1.26 or newer) to build Kubernetes from source"; exit 1; }
mkdir -p "$dest/src" "$bin"
exec 9>"$dest/build.lock"
flock 9  # two runs at once build it once
if complete; then echo "$bin"; exit 0; fi

export GOMODCACHE=$cache/go/mod GOCACHE=$cache/go/build GOFLAGS=-mod=mod GOTOOLCHAIN=local
started=$SECONDS

# Kubernetes. k8s.io/kubernetes requires its staging modules (k8s.io/api, client-go, ...) at
# v0.0.0 and replaces them with folders of its own repository, which its module does not carry;
# replaces act only in the main module, so a main module of ours replaces each with its
# published v0.X.Y (the list read from Kubernetes' own go.mod, not written here).
k8s_src=$dest/src/kubernetes
if [ ! -f "$k8s_src/ready" ]; then
  rm -rf "$k8s_src" && mkdir -p "$k8s_src" && cd "$k8s_src"
  upstream=$(go mod download -json "k8s.io/kubernetes@v$kube_version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -f "$upstream" ] || { say "the Go module proxy gave no go.mod for k8s.io/kubernetes@v$kube_version"; exit 1; }
  go_line=$(grep -m1 '^go ' "$upstream")
  {
    echo "module fiber.test/kubernetes-binaries"
    echo
    echo "$go_line"
    grep '^godebug' "$upstream" || true  # like replace, godebug acts only in the main module
  } >go.mod
  staging=v0.${kube_version#1.}
  for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$upstream"); do
    go mod edit -replace="$m=$m@$staging"
  done
  go mod edit -require="k8s.io/kubernetes@v$kube_version"
  printf 'package tools\n\nimport (\n' >tools.go
  for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
    printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c" >>tools.go
  done
  printf ')\n' >>tools.go
  say "resolving k8s.io/kubernetes v$kube_version and its modules"
  go mod tidy >&2
  touch ready
fi
cd "$k8s_src"
minor=$(echo "$kube_version" | cut -d. -f2)
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=v$kube_version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  ld="$ld -X $p.buildDate=1970-01-01T00:00:00Z"
done
# All six in one go build: their packages compile once and their links run side by side. Static
# and without cgo, the kubelet too (as k0s ships it): one build configuration for all six, where a
# cgo kubelet compiled every package a second time.
k8s_cmds=()
for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl kubelet; do
  [ -x "$bin/$c" ] || k8s_cmds+=("k8s.io/kubernetes/cmd/$c")
done
if [ "${#k8s_cmds[@]}" -gt 0 ]; then
  say "building ${k8s_cmds[*]##*/} (cold: many minutes on 2 cores)"
  rm -rf "$bin/partial" && mkdir -p "$bin/partial"
  CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$bin/partial/" "${k8s_cmds[@]}" >&2
  mv "$bin/partial/"* "$bin/" && rmdir "$bin/partial"
fi

# etcd: its server module replaces its sibling modules with folders too; a main module of ours
# takes them at the same published version.
etcd_src=$dest/src/etcd
if [ ! -x "$bin/etcd" ] || [ ! -x "$bin/etcdctl" ]; then
  rm -rf "$etcd_src" && mkdir -p "$etcd_src" && cd "$etcd_src"
  printf 'module fiber.test/etcd-binaries\n\ngo 1.24\n' >go.mod
  printf 'package tools\n\nimport (\n\t_ "go.etcd.io/etcd/server/v3"\n\t_ "go.etcd.io/etcd/etcdctl/v3"\n)\n' >tools.go
  go mod edit -require="go.etcd.io/etcd/server/v3@v$etcd_version" -require="go.etcd.io/etcd/etcdctl/v3@v$etcd_version"
  say "building etcd v$etcd_version"
  go mod tidy >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/etcd.partial" go.etcd.io/etcd/server/v3 >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/etcdctl.partial" go.etcd.io/etcd/etcdctl/v3 >&2
  mv "$bin/etcd.partial" "$bin/etcd" && mv "$bin/etcdctl.partial" "$bin/etcdctl"
fi

# containerd 2: no btrfs snapshotter (it needs cgo and the btrfs headers), static like its releases.
if [ ! -x "$bin/containerd" ] || [ ! -x "$bin/containerd-shim-runc-v2" ] || [ ! -x "$bin/ctr" ]; then
  say "building containerd v$containerd_version"
  cd "$dest/src"
  pkgs=()
  for c in containerd containerd-shim-runc-v2 ctr; do pkgs+=("github.com/containerd/containerd/v2/cmd/$c@v$containerd_version"); done
  GOBIN=$bin CGO_ENABLED=0 go install -trimpath -tags no_btrfs,urfave_cli_no_docs -ldflags "-s -w" "${pkgs[@]}" >&2
fi

complete || { say "some binaries are missing from $bin"; exit 1; }
say "built in $((SECONDS - started)) s"
# The Go build and module caches and the sources hold several GB that a warm run never reads
# again: dropped once every binary is here, so a machine with little disk left keeps room for
# the build and the tests (a cold CI run once failed to link for want of space).
go clean -cache -modcache >&2 || say "could not empty the Go caches under $cache/go"
rm -rf "$dest/src" "$cache/go"
echo "$bin"
