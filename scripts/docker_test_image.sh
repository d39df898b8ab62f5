#!/usr/bin/env bash
# Makes the image fiber-test-root:latest on the Docker engine without any registry: a near-empty
# root whose /usr, /lib and /bin come from the host once /usr is mounted (config key volumes:
# /usr:/usr:ro). The tests make it themselves when it is missing; the benchmarks use this.
set -euo pipefail
host=${DOCKER_HOST:-unix:///var/run/docker.sock}
sock=${host#unix://}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir"/{usr,etc,tmp,proc,dev,sys,sbin}
ln -s usr/lib "$dir/lib"; ln -s usr/lib64 "$dir/lib64"; ln -s usr/bin "$dir/bin"
if curl -sf --unix-socket "$sock" http://localhost/v1.41/images/fiber-test-root:latest/json >/dev/null; then exit 0; fi
tar -C "$dir" -c . | curl -sSf --unix-socket "$sock" -X POST -H 'Content-Type: application/x-tar' \
  --data-binary @- "http://localhost/v1.41/images/create?fromSrc=-&repo=fiber-test-root&tag=latest" >/dev/null
echo "made image fiber-test-root:latest"
