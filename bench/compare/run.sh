#!/usr/bin/env bash
# Runs fiber's benchmarks beside what they are compared with (Python multiprocessing, raw ZeroMQ, sockets,
# the Docker engine's own floor) in one go, and prints each figure with its ratio to the anchor.
# Usage: bench/compare/run.sh [build-dir] [channels|pool|imap|data|managers|ring|ring_slurm|docker|slurm|kubernetes|peers|cluster|envelope|all]   (default: build, all)
# cluster (not part of all either: its peers install once, into ~/.cache/fiber/cluster) measures
# fiber beside dask-jobqueue, submitit, HyperQueue, Ray and DragonHPC on the Slurm test cluster's
# two nodes (bench/compare/cluster/run_cluster.sh; CLUSTER_PEERS and CLUSTER_ROWS pick some).
# peers (not part of all: it installs the peers once, into ~/.cache/fiber/peers) measures the seed
# (uber/fiber 0.2.1), multiprocessing, Ray, Dask and loky on ten workloads beside fiber,
# alternating the order, and prints the lead table of docs/performance.md.
# Each part runs on its own: one that cannot run (no engine, a missing anchor, a failing
# benchmark) says what it could not do, the others still run, and the script then exits 1.
# The docker, slurm and kubernetes parts start their engines through scripts/engines.sh and stop
# again what they started.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) || { echo "no build folder ${1:-$root/build}: run scripts/build.sh first" >&2; exit 2; }
what=${2:-all}
case "$what" in channels|pool|imap|data|managers|ring|ring_slurm|docker|slurm|kubernetes|peers|cluster|envelope|all) ;; *) echo "unknown part '$what' (channels|pool|imap|data|managers|ring|ring_slurm|docker|slurm|kubernetes|peers|cluster|envelope|all)" >&2; exit 2 ;; esac
mp=$root/bench/compare/mp  # multiprocessing's side of each figure
tmp=$(mktemp -d)
# The start-up benchmarks of backend_bench (pool_idle runs only in the kubernetes part).
startup='--benchmark_filter=^(child_start_join|pool4_ready)'
trap 'rm -rf "$tmp"' EXIT
# Waits until a server started in the background listens: KIND x (a unix socket, "@name" for an
# abstract one) or t (TCP, ADDRESS:PORT), as ss sees it; at most 30 s, then the part stops.
fanout_unix_name=fiber-fanout-floor  # bench/compare/fanout_floor.cpp's
listening() {
  local kind=$1 address=$2 tries=0
  until ss -H -l -"$kind" 2>/dev/null | grep -qF -- " $address "; do
    ((++tries <= 300)) || { echo "!! nothing listens at $address after 30 s" >&2; return 1; }
    sleep 0.1
  done
}

# imap against map and against multiprocessing's imap, alternated twice in one run (the machine's
# speed moves): items a second over the same 200,000 small items on two workers.
part_imap() {
  echo "== imap: fiber and multiprocessing, alternated"
  for round in 1 2; do
    "$build/bench/pool_bench" --benchmark_filter=pool_imap_rate --benchmark_report_aggregates_only=true \
      --benchmark_format=json >"$tmp/imap-$round.json" 2>/dev/null
    python3 "$root/bench/compare/imap_rate.py" >"$tmp/mp-imap-$round.txt"
  done
  python3 - "$tmp" <<'PY2'
import json, re, statistics, sys
tmp = sys.argv[1]
fib, mp = {}, {}
for r in (1, 2):
    for b in json.load(open(f"{tmp}/imap-{r}.json"))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            m = re.search(r"imap:(\d)/chunksize:(-?\d+)", b["run_name"])
            form = ("imap" if m.group(1) == "1" else "map", {"-1": "default"}.get(m.group(2), m.group(2)))
            fib.setdefault(form, []).append(b["items_per_s"])
    for line in open(f"{tmp}/mp-imap-{r}.txt"):
        m = re.match(r"mp (\w+) chunksize=(\w+) items_per_s=([\d.]+)", line)
        if m: mp.setdefault((m.group(1), m.group(2)), []).append(float(m.group(3)))
f = {k: statistics.median(v) for k, v in fib.items()}
p = {k: statistics.median(v) for k, v in mp.items()}
fmap = f[("map", "default")]
for form in (("imap", "default"), ("imap", "1"), ("imap", "1000")):
    if form not in f: continue
    line = f"{form[0]} chunksize={form[1]}: fiber {f[form]/1e6:.2f} M items/s = {f[form]/fmap:.2f}x fiber's map"
    if form in p: line += f"; multiprocessing {p[form]/1e6:.3f} M/s, fiber {f[form]/p[form]:.1f}x"
    print(line)
print(f"map: fiber {fmap/1e6:.2f} M/s; multiprocessing {p[('map', 'default')]/1e6:.3f} M/s, fiber {fmap/p[('map', 'default')]:.1f}x")
PY2
}

part_pool() {
  echo "== pool: multiprocessing"
  (cd "$mp" && python3 pool_overhead.py --repeat 3 && python3 pool_throughput.py --repeat 3) | tee "$tmp/pypool.txt"
  echo "== pool: fiber"
  "$build/bench/pool_bench" --benchmark_report_aggregates_only=true --benchmark_format=json >"$tmp/pool.json" 2>/dev/null
  # The framework test's floor on this machine, right after fiber's (timer wake-ups move with the VM).
  "$build/bench/framework_floor" | tee "$tmp/framework_floor.txt"
  python3 - "$tmp" <<'PY2'
import json, re, sys
tmp = sys.argv[1]
py = open(f"{tmp}/pypool.txt").read()
rows = {}
for b in json.load(open(f"{tmp}/pool.json"))["benchmarks"]:
    # medians of repeated benchmarks; a benchmark run once has only its iteration row
    if b.get("aggregate_name") == "median" or b.get("run_type") == "iteration":
        rows[b["run_name"]] = b
def fib(prefix):
    return [b for n, b in rows.items() if n.startswith(prefix)]
for w in (2, 4):
    for d_ms, d_us in ((0, 0), (1, 1000), (10, 10000)):
        m = re.search(rf"W={w} D={d_ms}ms .*?ovh/task=([\d.]+)us ovh_cal/task=([\d.]+)us", py)
        f = [b for b in fib(f"pool_overhead/W:{w}/D_us:{d_us}/")]
        if not m or not f: continue
        b = f[0]
        print(f"pool overhead W={w} D={d_ms}ms: fiber {b['ovh_us']:.1f} us/task ({b['ovh_cal_us']:.1f} calibrated)"
              f"  mp {m.group(1)} ({m.group(2)} calibrated)  ratio {b['ovh_cal_us']/max(float(m.group(2)),1e-9):.2f}x calibrated")
for w in (2, 4):
    for c, label in ((0, "default"), (1000, "1000")):
        m = re.search(rf"W={w} N=100000 chunksize={label} .*?tasks_per_s=(\d+)", py)
        f = fib(f"pool_throughput/W:{w}/chunksize:{c}/")
        if not m or not f: continue
        t = f[0]["tasks_per_s"]
        print(f"pool throughput W={w} chunksize={label}: fiber {t/1e6:.2f} M tasks/s  mp {int(m.group(1))/1e6:.2f}  ratio {t/int(m.group(1)):.2f}x")
for w in (2, 4):
    f = fib(f"pool_start/W:{w}/")
    m = re.search(rf"W={w} D=0ms .*?pool_start\+warmup=([\d.]+)s", py)
    if f:
        ms = f[0]["real_time"]
        print(f"pool start W={w}: fiber {ms:.2f} ms until all workers ready" + (f"  (mp pool start+warmup {float(m.group(1))*1e3:.0f} ms)" if m else ""))
floor = re.search(r"median ratio_to_ideal=([\d.]+)", open(f"{tmp}/framework_floor.txt").read())
for b in fib("framework_rounds/"):
    print(f"framework test (5 workers, rounds of 5 x 1 ms): fiber {b['ratio_to_ideal']:.3f}x the calibrated ideal"
          f" ({b['ovh_per_round_us']:.0f} us per round)" + (f"  machine's floor (pipes, no library) {float(floor.group(1)):.3f}x" if floor else ""))
for b in fib("pool_overhead_with_kills"):
    print(f"pool overhead W=4 D=1ms with a worker killed every second: {b['ovh_cal_us']:.1f} us/task calibrated, killed {b['killed']:.0f}, results exact")
    break
PY2
}

# The data path: the evolution-strategies round and 8 MB payloads, beside
# multiprocessing running the same workloads (bench/compare/data_path.py), alternating.
part_data() {
  for round in 1 2; do
    echo "== data: multiprocessing, round $round"
    python3 "$root/bench/compare/data_path.py" --repeat 1 | tee -a "$tmp/pydata.txt"
    echo "== data: fiber, round $round"
    "$build/bench/data_path_bench" --benchmark_report_aggregates_only=true --benchmark_format=json >"$tmp/data-$round.json" 2>/dev/null
  done
  python3 - "$tmp" <<'PYD'
import json, re, sys
tmp = sys.argv[1]
py = open(f"{tmp}/pydata.txt").read()
mp_es = [float(x) for x in re.findall(r"es_round .*ms_per_generation=([\d.]+)", py)]
mp_mb = [float(x) for x in re.findall(r"payload_8MB .*MB_per_s=([\d.]+)", py)]
mp_model = [float(x) for x in re.findall(r"model_8MB .*ms_per_map=([\d.]+)", py)]
for rnd in (1, 2):
    rows = {b["run_name"]: b for b in json.load(open(f"{tmp}/data-{rnd}.json"))["benchmarks"] if b.get("aggregate_name") == "median"}
    es = next(b for n, b in rows.items() if n.startswith("es_round/"))["real_time"]
    copies = next(b for n, b in rows.items() if n.startswith("es_round_copies/"))["real_time"]
    refs = next(b for n, b in rows.items() if n.startswith("es_round_refs/"))["real_time"]
    handle = next(b for n, b in rows.items() if n.startswith("es_round_shared/"))["real_time"]
    mb = next(b for n, b in rows.items() if n.startswith("payload_8MB"))["bytes_per_second"] / 1e6
    model = {k: next(b for n, b in rows.items() if n.startswith(f"model_8MB_{k}/"))["real_time"] for k in ("refs", "shared", "span")}
    print(f"round {rnd}: ES round fiber {es:.2f} ms/generation  mp {mp_es[rnd-1]:.2f}  fiber/mp {es/mp_es[rnd-1]:.2f}x time"
          f" (fiber with a copy of theta per task {copies:.2f} ms, {copies/mp_es[rnd-1]:.2f}x;"
          f" const references {refs:.2f} ms, {refs/mp_es[rnd-1]:.2f}x; fiber::shared {handle:.2f} ms, {handle/mp_es[rnd-1]:.2f}x)"
          f";  8 MB payloads fiber {mb:.0f} MB/s  mp {mp_mb[rnd-1]:.0f}  fiber/mp {mb/mp_mb[rnd-1]:.2f}x speed")
    mm = mp_model[rnd - 1]
    print(f"round {rnd}: an 8 MB model read by 64 tasks, mp {mm:.1f} ms/map; fiber references {model['refs']:.1f} ms"
          f" ({model['refs']/mm:.2f}x), fiber::shared {model['shared']:.1f} ms ({model['shared']/mm:.2f}x),"
          f" fiber::shared span {model['span']:.1f} ms ({model['span']/mm:.2f}x)")
PYD
}

# The envelope of one master: what one worker costs it, on direct links and through
# ZeroMQ with CURVE at up to 1,024 local workers, and over TCP to the Slurm cluster's nodes (ZeroMQ,
# TLS direct links, host hubs, host hubs that fork their node's workers); then
# the model at 10,000 workers on 100 hosts (bench/compare/envelope.py).
part_envelope() {
  local g='--benchmark_format=json'
  "$build/bench/envelope_bench" $g >"$tmp/envelope-direct.json" 2>/dev/null
  FIBER_ENCRYPTION=always FIBER_LOCAL_TRANSPORT=zeromq "$build/bench/envelope_bench" $g >"$tmp/envelope-curve.json" 2>/dev/null
  # On Slurm, as many workers as fill both nodes but for one CPU each for a host hub: 6 on the test
  # cluster, 1,024 on one started with FIBER_SLURM_NODE_CPUS=513; one pool size, every transport.
  local slurm=()
  if "$root/scripts/engines.sh" start slurm >/dev/null 2>&1; then
    export SLURM_CONF="$root/build/engines/slurm/slurm.conf"
    local fill=$(( 2 * ($(sinfo -h -N -o %c | head -1) - 1) ))
    for transport in zeromq direct hub fork; do
      local remote=$transport workers=engine
      [ "$transport" = fork ] && remote=hub workers=fork  # each node's hub forks its workers
      FIBER_BACKEND=slurm FIBER_REMOTE_TRANSPORT=$remote FIBER_HUB_WORKERS=$workers ENVELOPE_WORKERS=$fill \
        "$build/bench/envelope_bench" $g >"$tmp/envelope-slurm-$transport.json" 2>/dev/null &&
        slurm+=("$tmp/envelope-slurm-$transport.json")
    done
    [ "${#slurm[@]}" = 4 ] || slurm=()
    # The floors under the fan-out, same number of clients: a unix socket on this host; TCP to
    # clients in the two nodes' network namespaces (half in each); and a relay in each namespace
    # in front of its clients (the floor of a host hub).
    local n=$fill msgs=$((fill * 32))
    "$build/bench/fanout_floor" server unix $n $msgs & listening x "@$fanout_unix_name"
    "$build/bench/fanout_floor" client unix $n; wait
    "$build/bench/fanout_floor" server tcp $n $msgs 10.77.0.1 & listening t 10.77.0.1:47123
    ip netns exec fibern1 "$build/bench/fanout_floor" client tcp 10.77.0.1 $((n / 2)) &
    ip netns exec fibern2 "$build/bench/fanout_floor" client tcp 10.77.0.1 $((n - n / 2)); wait
    "$build/bench/fanout_floor" server hub 2 $msgs 10.77.0.1 & listening t 10.77.0.1:47123
    ip netns exec fibern1 "$build/bench/fanout_floor" relay 10.77.0.1 $((n / 2)) &
    ip netns exec fibern2 "$build/bench/fanout_floor" relay 10.77.0.1 $((n - n / 2)); wait
  fi
  python3 "$root/bench/compare/envelope.py" "$tmp/envelope-direct.json" "$tmp/envelope-curve.json" "${slurm[@]}"
}

part_managers() {
  echo "== managers: multiprocessing"
  (cd "$mp" && python3 managers.py --repeat 3) | tee "$tmp/pymgr.txt"
  "$build/bench/raw_zmq_rtt" | tee "$tmp/rawmgr.txt"
  echo "== managers: fiber"
  "$build/bench/manager_bench" --benchmark_report_aggregates_only=true --benchmark_format=json >"$tmp/mgr.json" 2>/dev/null
  python3 - "$tmp" <<'PY3'
import json, re, sys
tmp = sys.argv[1]
py = open(f"{tmp}/pymgr.txt").read()
raw = float(re.search(r"rtt plain ([\d.]+) us", open(f"{tmp}/rawmgr.txt").read()).group(1))
rows = {b["run_name"].split("/")[0]: b for b in json.load(open(f"{tmp}/mgr.json"))["benchmarks"] if b.get("aggregate_name") == "median"}
sync_call = rows["manager_call_sync"]["real_time"]
print(f"(a) sync call, physics only: {sync_call:.1f} us = {sync_call/raw:.2f}x raw ZeroMQ router/dealer round trip ({raw:.1f} us)")
rnd = rows['manager_round_async']['real_time']
print(f"(a) async, 4 calls on 4 managers sent together: {rnd:.1f} us per round, {rnd/4:.1f} us per call")
for mode, label in (("sync", "harness_sync"), ("threads", "harness_async")):
    m = re.search(rf"mode={mode}\s.*?steps_time=([\d.]+)s", py)
    b = rows[label]
    t = b["steps_time_s"]
    mp = float(m.group(1)) if m else float("nan")
    print(f"(b) {label}: {t:.3f} s (ideal {b['ideal_s']:.2f} s, {t/b['ideal_s']:.2f}x ideal; ovh_cal {b['ovh_cal_us_per_call']:.0f} us/call)"
          f"  mp {mode} {mp:.3f} s  ratio {t/mp:.2f}x")
PY3
}

part_docker() {
  echo "== backends: local beside docker (same run)"
  "$root/scripts/engines.sh" start docker || return 1
  curl -s --max-time 2 --unix-socket /var/run/docker.sock http://localhost/_ping | grep -q OK ||
    { echo "no Docker engine answers on /var/run/docker.sock (see build/engines/dockerd.log)"; return 1; }
  "$root/scripts/docker_test_image.sh"
  (cd "$mp" && python3 process_start.py) | tee "$tmp/pystart.txt"
  # The engine's own floor: create, start, wait and remove a container running /bin/true straight
  # over the API (what `docker run --rm` costs here).
  python3 "$root/bench/compare/docker_floor.py" | tee "$tmp/floor.txt"
  FIBER_BACKEND=local "$build/bench/backend_bench" "$startup" --benchmark_report_aggregates_only=true \
    --benchmark_format=json >"$tmp/local.json" 2>/dev/null
  FIBER_BACKEND=docker FIBER_IMAGE=fiber-test-root:latest FIBER_VOLUMES="/usr:/usr:ro,$build:$build:ro" \
    "$build/bench/backend_bench" "$startup" --benchmark_report_aggregates_only=true --benchmark_format=json >"$tmp/docker.json" 2>/dev/null
  python3 - "$tmp" <<'PY3'
import json, re, sys
tmp = sys.argv[1]
def medians(path):
    return {b["run_name"].split("/")[0]: b["real_time"] for b in json.load(open(path))["benchmarks"] if b.get("aggregate_name") == "median"}
floor_text = open(f"{tmp}/floor.txt").read()
floors = {"child_start_join": float(re.search(r"engine floor: .*?median=([\d.]+)ms", floor_text).group(1)),
          "pool4_ready": float(re.search(r"engine floor x4: .*?median=([\d.]+)ms", floor_text).group(1))}
local, docker = medians(f"{tmp}/local.json"), medians(f"{tmp}/docker.json")
py = open(f"{tmp}/pystart.txt").read()
mp_spawn = float(re.search(r"mp\(spawn\).*?median=([\d.]+)ms", py).group(1))
for name, label in (("child_start_join", "child start+join"), ("pool4_ready", "Pool(4) until ready")):
    l, d = local[name], docker[name]
    print(f"{label:22s} local {l:8.2f} ms   docker {d:8.2f} ms   docker/local {d/l:6.1f}x   docker/engine-floor {d/floors[name]:5.2f}x   docker/mp-spawn {d/mp_spawn:5.1f}x")
PY3
}

part_kubernetes() {
  echo "== backends: kubernetes (the real test cluster) beside docker and the cluster's own floor (same run)"
  "$root/scripts/engines.sh" start docker registry kubernetes || return 1
  local kube="$root/build/engines/k8s"
  "$root/scripts/docker_test_image.sh"
  python3 "$root/bench/compare/kube_floor.py" "$kube" 10 | tee "$tmp/floor.txt"
  python3 "$root/bench/compare/docker_floor.py" | tee -a "$tmp/floor.txt"
  local volumes="/usr:/usr:ro,$build:$build:ro"
  FIBER_BACKEND=docker FIBER_IMAGE=fiber-test-root:latest FIBER_VOLUMES="$volumes" \
    "$build/bench/backend_bench" "$startup" --benchmark_report_aggregates_only=true --benchmark_format=json >"$tmp/docker.json" 2>/dev/null
  # As the service account fiber (the Role of rbac.yaml); every request it makes is in the API
  # server's audit log, which tells the idle benchmark's phases apart by time.
  local kenv=(KUBECONFIG="$kube/kubeconfig" FIBER_BACKEND=kubernetes FIBER_IMAGE="$(cat "$kube/image")"
              FIBER_VOLUMES="$volumes" FIBER_MASTER_ADDRESS="$(cat "$kube/gateway")" FIBER_KUBERNETES_CPU_REQUEST=100m)
  env "${kenv[@]}" "$build/bench/backend_bench" "$startup" \
    --benchmark_report_aggregates_only=true --benchmark_format=json >"$tmp/kubernetes.json" 2>/dev/null
  env "${kenv[@]}" "$build/bench/backend_bench" --benchmark_filter=pool_idle --benchmark_format=json >"$tmp/idle.json" 2>/dev/null
  python3 - "$tmp" "$kube/audit.log" <<'PYK'
import datetime, json, re, sys
from collections import Counter
tmp, audit = sys.argv[1:3]
def medians(path):
    return {b["run_name"].split("/")[0]: b["real_time"] for b in json.load(open(path))["benchmarks"] if b.get("aggregate_name") == "median"}
floor = open(f"{tmp}/floor.txt").read()
f = lambda label: float(re.search(rf"^{label}: .*?median=([\d.]+)ms", floor, re.M).group(1))
docker, kube = medians(f"{tmp}/docker.json"), medians(f"{tmp}/kubernetes.json")
for name, label, kfloor, dfloor in (("child_start_join", "child start+join", "cluster floor", "engine floor"),
                                    ("pool4_ready", "Pool(4) until ready", "cluster floor x4", "engine floor x4")):
    k, d = kube[name], docker[name]
    print(f"{label:20s} kubernetes {k:8.1f} ms  docker {d:8.1f} ms  kubernetes/docker {k/d:5.2f}x  "
          f"kubernetes/cluster-floor {k/f(kfloor):5.2f}x  docker/engine-floor {d/f(dfloor):5.2f}x  "
          f"(floors: cluster {f(kfloor):.1f} ms, engine {f(dfloor):.1f} ms)")
def when(e):
    return datetime.datetime.fromisoformat(e["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()
requests = []
for line in open(audit):
    e = json.loads(line)
    if e.get("stage") == "ResponseComplete" and e["user"]["username"] == "system:serviceaccount:default:fiber":
        requests.append(e)
def kind(e):
    if "watch=" in e["requestURI"] and "watch=false" not in e["requestURI"]: return "watch"
    return e["verb"] if e.get("objectRef", {}).get("subresource") is None else e["verb"] + " " + e["objectRef"]["subresource"]
for b in json.load(open(f"{tmp}/idle.json"))["benchmarks"]:
    workers = b["run_name"].split("/")[1]
    phase = lambda a, z: Counter(kind(e) for e in requests if b[a] <= when(e) < b[z])
    start, idle, stop = phase("t_start", "t_ready"), phase("t_ready", "t_idle_end"), phase("t_idle_end", "t_end")
    minutes = (b["t_idle_end"] - b["t_ready"]) / 60
    fmt = lambda c: ", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "none"
    print(f"Pool({workers}): ready in {b['t_ready'] - b['t_start']:.1f} s; API requests to start: {sum(start.values())} ({fmt(start)}); "
          f"per idle minute: {sum(idle.values()) / minutes:.1f} ({fmt(idle)}); to stop: {sum(stop.values())} ({fmt(stop)})")
PYK
}

part_slurm() {
  echo "== backends: slurm batch jobs and steps beside Slurm's own floor (same run)"
  "$root/scripts/engines.sh" start slurm || return 1
  export SLURM_CONF="$root/build/engines/slurm/slurm.conf"
  sinfo -h -o %T | grep -qE 'idle|mix' || { echo "the test Slurm cluster does not answer"; return 1; }
  # Batch jobs: the master outside any allocation.
  python3 "$root/bench/compare/slurm_floor.py" batch 5 | tee "$tmp/floor_batch.txt"
  FIBER_BACKEND=slurm "$build/bench/backend_bench" "$startup" --benchmark_report_aggregates_only=true \
    --benchmark_format=json >"$tmp/batch.json" 2>/dev/null
  # One 256 MB fiber::shared object read by 64 tasks: one worker (one copy to one host), then as
  # many workers as fill both nodes (a copy to each node, mapped by its workers), alternating: 8 on
  # the test cluster, 64 on one started with FIBER_SLURM_NODE_CPUS=32 (Slurm fills a node before
  # the next, so only a full cluster spreads the workers over both).
  local fill=$(( 2 * $(sinfo -h -N -o %c | head -1) ))
  for round in 1 2; do
    FIBER_BACKEND=slurm "$build/bench/backend_bench" --benchmark_filter="^shared_256MB/(1|$fill)/" --benchmark_format=json \
      >"$tmp/shared-$round.json" 2>/dev/null
  done
  python3 - "$tmp" "$fill" <<'PYS'
import json, sys
for rnd in (1, 2):
    rows = {b["run_name"]: b for b in json.load(open(f"{sys.argv[1]}/shared-{rnd}.json"))["benchmarks"]}
    one = next(b for n, b in rows.items() if n.startswith("shared_256MB/1/"))
    full = next(b for n, b in rows.items() if n.startswith(f"shared_256MB/{sys.argv[2]}/"))
    print(f"round {rnd}: 256 MB shared, 64 tasks: 1 worker {one['real_time']:.0f} ms/map ({one['copies_per_map']:.2f} copies sent);"
          f" {sys.argv[2]} workers on {full['hosts']:.0f} hosts {full['real_time']:.0f} ms/map ({full['copies_per_map']:.2f} copies sent),"
          f" {full['real_time']/one['real_time']:.2f}x one copy to one host")
PYS
  # Steps: the floor and fiber both inside one two-node allocation.
  sbatch --wait --quiet -N2 --cpus-per-task=2 -o "$tmp/steps.out" --wrap \
    "python3 $root/bench/compare/slurm_floor.py steps 10 $build/bench/backend_bench --benchmark_list_tests=true >$tmp/floor_steps.txt &&
     FIBER_BACKEND=slurm $build/bench/backend_bench '$startup' --benchmark_report_aggregates_only=true --benchmark_format=json >$tmp/steps.json 2>/dev/null" ||
    { cat "$tmp/steps.out"; return 1; }
  cat "$tmp/floor_steps.txt"
  python3 - "$tmp" <<'PY3'
import json, re, sys
tmp = sys.argv[1]
def medians(path):
    return {b["run_name"].split("/")[0]: b["real_time"] for b in json.load(open(path))["benchmarks"] if b.get("aggregate_name") == "median"}
def floor(text, label):
    m = re.search(rf"^{label}: .*?median=([\d.]+)ms", text, re.M)
    return float(m.group(1)) if m else None
for mode in ("batch", "steps"):
    text = open(f"{tmp}/floor_{mode}.txt").read()
    fib = medians(f"{tmp}/{mode}.json")
    for name, label, suffix in (("child_start_join", "child start+join", ""), ("pool4_ready", "Pool(4) until ready", " x4")):
        line = f"{mode:6s} {label:20s} fiber {fib[name]:8.1f} ms"
        for kind in ("floor", "polled floor", "program floor"):
            f = floor(text, f"{mode} {kind}{suffix}")
            if f: line += f"   {kind} {f:8.1f} ms ({fib[name]/f:5.2f}x)"
        print(line)
PY3
}

part_channels() {
echo "== anchors"
"$build/bench/raw_zmq_rtt" | tee "$tmp/raw.txt"
"$build/bench/wakeup_floor" | tee "$tmp/wakeup.txt"
(cd "$mp" && python3 process_start.py && python3 queue_pingpong.py) | tee "$tmp/py.txt"

echo "== fiber"
"$build/bench/process_bench" --benchmark_report_aggregates_only=true --benchmark_format=json >"$tmp/process.json" 2>/dev/null
"$build/bench/queue_bench" --benchmark_report_aggregates_only=true --benchmark_format=json >"$tmp/queue.json" 2>/dev/null
"$build/bench/op_bench" --benchmark_format=json >"$tmp/op.json" 2>/dev/null

python3 - "$tmp" <<'PY'
import json, re, sys
tmp = sys.argv[1]
def medians(path):
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            out[b["run_name"].split("/")[0]] = b
    return out
fib = {**medians(f"{tmp}/process.json"), **medians(f"{tmp}/queue.json")}
raw = open(f"{tmp}/raw.txt").read()
py = open(f"{tmp}/py.txt").read()
num = lambda pat, text: float(re.search(pat, text).group(1))
raw_curve = num(r"rtt curve ([\d.]+)", raw)
raw_plain = num(r"rtt plain ([\d.]+)", raw)
mp_spawn = num(r"mp\(spawn\).*?median=([\d.]+)ms", py)
mp_fork = num(r"mp\(fork\)\s+n=.*?median=([\d.]+)ms", py)
mp_q = num(r"channel=SimpleQueue rtt=([\d.]+)us", py)
mp_p = num(r"channel=Pipe\s+rtt=([\d.]+)us", py)
mp_qb = num(r"channel=SimpleQueue.*?bulk_1MB=([\d.]+)MB/s", py)
mp_pb = num(r"channel=Pipe.*?bulk_1MB=([\d.]+)MB/s", py)
ms = lambda b: b["real_time"] * {"ms": 1, "us": 1e-3, "ns": 1e-6}[b["time_unit"]]
us = lambda b: ms(b) * 1e3
start = ms(fib["process_start_join"])
print(f"process start+join median  {start:7.2f} ms   vs mp spawn {mp_spawn} ms: {start/mp_spawn:.2f}x   vs mp fork {mp_fork} ms: {start/mp_fork:.2f}x")
for name, mp in (("simple_queue_rtt_16B", mp_q), ("pipe_rtt_16B", mp_p)):
    t = us(fib[name])
    print(f"{name:26s} {t:7.1f} us   vs raw zmq curve {raw_curve}: {t/raw_curve:.2f}x   plain {raw_plain}: {t/raw_plain:.2f}x   mp {mp}: {t/mp:.2f}x")
wake = open(f"{tmp}/wakeup.txt").read()
sock_sleep = num(r"socketpair sleeping rtt ([\d.]+)", wake)
sock_spin = num(r"socketpair spin 50us rtt ([\d.]+)", wake)
t = us(fib["simple_queue_rtt_16B"])
print(f"{'':26s} machine's floor over a socketpair, no library: {sock_spin} us polling first ({t/sock_spin:.2f}x),"
      f" {sock_sleep} us sleeping at once ({t/sock_sleep:.2f}x)")
for b in json.load(open(f"{tmp}/op.json"))["benchmarks"]:  # the ops alone: fiber's code in a round trip
    print(f"{b['name']:26s} {us(b):7.2f} us a pair of ops, no I/O")
for name, mp in (("simple_queue_bulk_1MB", mp_qb), ("pipe_bulk_1MB", mp_pb)):
    gbs = fib[name]["bytes_per_second"] / 1e9
    print(f"{name:26s} {gbs:7.2f} GB/s  vs mp {mp/1e3:.2f} GB/s: {gbs*1e3/mp:.2f}x")
PY
}

# Prints fiber ÷ Open MPI for each collective and size of both rounds ($tmp/{fiber,mpi}-R.txt),
# with the allreduce's bus bandwidth (size × 2(N−1)/N ÷ time) for N = $1 members.
ring_ratios() {
  python3 - "$tmp" "$1" <<'PYR'
import re, sys
tmp, n = sys.argv[1], int(sys.argv[2])
def read(path):
    return {(m[0], int(m[1])): float(m[2]) for m in re.findall(r"(\w+) bytes=(\d+) us=([\d.]+)", open(path).read())}
for rnd in (1, 2):
    mpi, fib = read(f"{tmp}/mpi-{rnd}.txt"), read(f"{tmp}/fiber-{rnd}.txt")
    for key in sorted(fib, key=lambda k: (k[0], k[1])):
        if key not in mpi: continue
        kind, size = key
        line = f"round {rnd}: {kind:9s} {size:>9d} B  fiber {fib[key]:9.1f} us  Open MPI {mpi[key]:9.1f} us  fiber/MPI {fib[key]/mpi[key]:6.3g}x time"
        if kind == "allreduce" and size:
            bus = lambda t: size * 2 * (n - 1) / n / t / 1e3  # GB/s
            line += f"  busbw fiber {bus(fib[key]):.2f} GB/s, MPI {bus(mpi[key]):.2f}"
        print(line)
PYR
}

# Ring collectives: 4 members on this host, fiber's ring beside Open MPI's
# (Debian's openmpi-bin, libopenmpi-dev; shared memory between the ranks), alternating twice.
part_ring() {
  command -v mpicc >/dev/null || { echo "!! ring: no mpicc: apt-get install openmpi-bin libopenmpi-dev" >&2; return 1; }
  mpicc -O2 "$root/bench/compare/mpi_collectives.c" -o "$tmp/mpi_collectives"
  for round in 1 2; do
    echo "== ring: Open MPI, round $round"
    mpirun --allow-run-as-root --oversubscribe -np 4 "$tmp/mpi_collectives" | tee "$tmp/mpi-$round.txt"
    echo "== ring: fiber, round $round"
    "$build/bench/ring_bench" 4 | tee "$tmp/fiber-$round.txt"
  done
  ring_ratios 4
}

# Ring collectives across the two Slurm nodes (TCP between them): 2 members, one per node, beside
# Open MPI's TCP transport started by mpirun inside a two-node allocation.
part_ring_slurm() {
  command -v mpicc >/dev/null || { echo "!! ring_slurm: no mpicc: apt-get install openmpi-bin libopenmpi-dev" >&2; return 1; }
  "$root/scripts/engines.sh" start slurm || return 1
  export SLURM_CONF="$root/build/engines/slurm/slurm.conf"
  mpicc -O2 "$root/bench/compare/mpi_collectives.c" -o "$tmp/mpi_collectives"
  for round in 1 2; do
    echo "== ring across nodes: Open MPI (TCP), round $round"
    salloc -N2 --ntasks-per-node=1 mpirun --allow-run-as-root --mca plm_slurm_args "--mpi=none" --mca btl tcp,self \
      --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 -np 2 "$tmp/mpi_collectives" |
      tee "$tmp/mpi-$round.txt"
    echo "== ring across nodes: fiber, round $round"
    FIBER_BACKEND=slurm FIBER_SLURM_SBATCH_ARGS=--exclusive "$build/bench/ring_bench" 2 | tee "$tmp/fiber-$round.txt"
    if [ -n "${RING_BEFORE:-}" ]; then
      echo "== ring across nodes: fiber before ($RING_BEFORE), round $round"
      FIBER_BACKEND=slurm FIBER_SLURM_SBATCH_ARGS=--exclusive "$RING_BEFORE" 2 | tee "$tmp/before-$round.txt"
    fi
  done
  ring_ratios 2
  [ -n "${RING_BEFORE:-}" ] && before_after_ratios
}

# With RING_BEFORE=<another build's ring_bench>: that build beside this one, round by round
# (after ÷ before, time), for a change to the ring's links.
before_after_ratios() {
  python3 - "$tmp" <<'PYB'
import re, sys
tmp = sys.argv[1]
def read(path):
    return {(m[0], int(m[1])): float(m[2]) for m in re.findall(r"(\w+) bytes=(\d+) us=([\d.]+)", open(path).read())}
for rnd in (1, 2):
    before, after = read(f"{tmp}/before-{rnd}.txt"), read(f"{tmp}/fiber-{rnd}.txt")
    for key in sorted(after):
        if key in before:
            print(f"round {rnd}: {key[0]:9s} {key[1]:>9d} B  after {after[key]:9.1f} us  before {before[key]:9.1f} us  after/before {after[key]/before[key]:6.3g}x time")
PYB
}

part_peers() {
  # The peers live in a virtual environment of their own, outside the clone, installed once from
  # pinned wheels (bench/compare/peers/requirements.txt); building and testing fiber never need it.
  local env=${FIBER_PEERS_ENV:-$HOME/.cache/fiber/peers/venv} req="$root/bench/compare/peers/requirements.txt"
  local sdists="$root/bench/compare/peers/sdists.txt"
  if ! cat "$req" "$sdists" | cmp -s - "$env/installed.txt" 2>/dev/null; then
    echo "== peers: installing $(grep -v '^#' "$req" | tr '\n' ' ') into $env"
    python3 -m venv "$env"
    "$env/bin/pip" install -q --only-binary :all: -r "$req"
    # nnpy builds against nanomsg's headers and library (Debian's, the version uber/fiber's
    # nnpy-bundle would have built from git).
    dpkg -s libnanomsg-dev >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -q libnanomsg-dev >/dev/null
    grep -v '^#' "$sdists" | while read -r name version sha; do
      file=$("$env/bin/python" "$root/bench/compare/peers/fetch_sdist.py" "$name" "$version" "$sha" "$(dirname "$env")/sdists")
      echo "== peers: $name $version from the sdist read before ($sha)"
      "$env/bin/pip" install -q --no-build-isolation --no-deps "$file"
    done
    cat "$req" "$sdists" >"$env/installed.txt"
  fi
  # fiber's side of each workload, from its own benchmarks (medians of repetitions).
  fiber_side() {
    # The local backend, as the peers run on this machine alone (not a backend the caller's
    # environment chose).
    local -x FIBER_BACKEND=local
    local r=$1 g='--benchmark_report_aggregates_only=true --benchmark_format=json'
    "$build/bench/process_bench" --benchmark_filter='^process_start_join' $g >"$tmp/fiber-$r-process.json" 2>/dev/null
    "$build/bench/queue_bench" --benchmark_filter='_rtt_16B' $g >"$tmp/fiber-$r-queue.json" 2>/dev/null
    "$build/bench/pool_bench" $g >"$tmp/fiber-$r-pool.json" 2>/dev/null \
      --benchmark_filter='^(pool_overhead/W:(2|4)/D_us:(0|1000)/|pool_throughput/W:(2|4)/chunksize:0/|pool_apply_latency|framework_rounds|pool_ready_ran_a_task/W:(32|256))'
    "$build/bench/data_path_bench" --benchmark_filter='^(es_round/|es_round_refs|es_round_shared|payload_8MB)' $g >"$tmp/fiber-$r-data.json" 2>/dev/null
    "$build/bench/manager_bench" --benchmark_filter='^harness' $g >"$tmp/fiber-$r-managers.json" 2>/dev/null
    # The machine's floors, right beside fiber's figures (timer wake-ups move with the VM).
    { "$build/bench/wakeup_floor"; "$build/bench/framework_floor"; } >"$tmp/floor-$r.txt"
  }
  local peers=("$env/bin/python" "$root/bench/compare/peers/peers.py" --repeat 3 --fiber-pi "$build/examples/pi_estimation")
  for round in 1 2; do  # fiber first, then the peers first (pi alternates within each peer)
    echo "== peers, round $round"
    if [ $round = 1 ]; then
      fiber_side $round
      "${peers[@]}" | tee "$tmp/peers-$round.txt"
    else
      "${peers[@]}" --peers ray,dask,loky,seed,mp | tee "$tmp/peers-$round.txt"
      fiber_side $round
    fi
  done
  # What the table is made of stays beside the build (the run takes 20 minutes).
  rm -rf "$build/peers-last" && mkdir -p "$build/peers-last"
  cp "$tmp"/fiber-[12]-*.json "$tmp"/peers-[12].txt "$tmp"/floor-[12].txt "$build/peers-last/"
  python3 "$root/bench/compare/peers/table.py" "$build/peers-last"
}

part_cluster() { "$root/bench/compare/cluster/run_cluster.sh" "$build"; }

# Runs part $1 in a subshell that stops at its first failing command, and remembers the parts
# that could not run.
failed=()
run_part() {
  # (set -e is ignored in a subshell whose status is tested with || or if, hence the two steps)
  ( set -eE; trap 'echo "!! $1: stopped at: $BASH_COMMAND (exit $?)" >&2' ERR; "part_$1" )
  (($? == 0)) || failed+=("$1")
}
started_docker=false
[ -f "$root/build/engines/docker.pid" ] || started_docker=true
started_slurm=false
[ -f "$root/build/engines/slurmctld.pid" ] || started_slurm=true
started_kubernetes=false
[ -f "$root/build/engines/k8s/ready" ] || started_kubernetes=true
for p in pool imap data managers ring ring_slurm docker kubernetes slurm envelope channels; do
  if [ "$what" = all ] || [ "$what" = "$p" ]; then run_part "$p"; fi
done
[ "$what" = peers ] && run_part peers
[ "$what" = cluster ] && run_part cluster
# Only stop an engine this run started (its pid file did not exist before).
if $started_kubernetes && [ -f "$root/build/engines/k8s/ready" ]; then "$root/scripts/engines.sh" stop kubernetes; fi
if $started_docker && [ -f "$root/build/engines/docker.pid" ]; then "$root/scripts/engines.sh" stop docker; fi
if $started_slurm && [ -f "$root/build/engines/slurmctld.pid" ]; then "$root/scripts/engines.sh" stop slurm; fi
if ((${#failed[@]})); then
  echo "== could not run: ${failed[*]} (see the lines starting with !! above)" >&2
  exit 1
fi
