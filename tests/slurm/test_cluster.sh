# Sourced by the Slurm test scripts: points SLURM_CONF at the test cluster unless the caller named
# one, and exits 77 (skipped) when no cluster answers and engines are not required (1 when they are).
: "${SLURM_CONF:=${FIBERTEST_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}/build/engines/slurm/slurm.conf}"
export SLURM_CONF
required() {
  local v=${FIBER_REQUIRE_ENGINES-${CI-}}
  [ -n "$v" ] && [ "$v" != 0 ] && [ "$v" != false ]
}
if ! sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mix|alloc'; then
  echo "no Slurm cluster answers (SLURM_CONF=$SLURM_CONF; scripts/engines.sh start slurm brings one up)"
  required && exit 1
  exit 77
fi
