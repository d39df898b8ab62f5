#!/usr/bin/env bash
# Installs the Debian 12 packages fiber needs to build, test and benchmark.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config ccache mold git clang-16 libc++-16-dev libc++abi-16-dev clang-tidy-16
  libasio-dev libzmq3-dev cppzmq-dev libboost1.81-dev libboost-json1.81-dev
  libcurl4-openssl-dev libcli11-dev libyaml-dev libarchive-dev libssl-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-venv python3-pip curl doxygen
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Every apt-get of the scripts waits for dpkg's lock (another install running beside it, as the
# engines' and the browser test's can be) rather than failing at once.
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
