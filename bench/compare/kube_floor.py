#!/usr/bin/python3
"""The test Kubernetes cluster's own floor for start-up, straight over its API (no fiber): a bare
pod of the suites' image running /bin/true created, seen Succeeded through a watch, and deleted;
and four pods created in parallel until the watch shows all four running (what a Pool(4) waits
for). As the service account fiber, in namespace default, as fiber's own pods are.

    kube_floor.py STATE_DIR [N]

STATE_DIR: build/engines/k8s (scripts/kubernetes_cluster.sh).
"""
import json
import os
import ssl
import statistics
import sys
import threading
import time
import urllib.request

state = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
server = open(f"{state}/url").read().strip()
tls = ssl.create_default_context(cafile=f"{state}/ca.crt")
ns = "default"
image = open(f"{state}/image").read().strip()
run = f"floor-{os.getpid()}"


def call(method, path, body=None, stream=False, timeout=60):
    req = urllib.request.Request(server + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + open(f"{state}/token").read().strip(),
                                          "Content-Type": "application/json"})
    r = urllib.request.urlopen(req, context=tls, timeout=timeout)
    return r if stream else json.loads(r.read() or b"null")


def pod(name, command):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"bench": run}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": image, "command": command,
                                     "volumeMounts": [{"name": "usr", "mountPath": "/usr", "readOnly": True}]}],
                     "volumes": [{"name": "usr", "hostPath": {"path": "/usr"}}]}}


def wait_for(names, phases, rv):
    """Follows the watch from `rv` until every pod in `names` is in one of `phases`."""
    left = set(names)
    while left:
        w = call("GET", f"/api/v1/namespaces/{ns}/pods?watch=1&labelSelector=bench%3D{run}&resourceVersion={rv}"
                        "&timeoutSeconds=60", stream=True, timeout=90)
        for line in w:
            ev = json.loads(line)
            o = ev["object"]
            rv = o["metadata"]["resourceVersion"]
            if o["metadata"].get("name") in left and o.get("status", {}).get("phase") in phases:
                left.discard(o["metadata"]["name"])
                if not left:
                    break
        w.close()
    return rv


def delete(name):
    call("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", {"gracePeriodSeconds": 0})


times = []
for i in range(n):
    t = time.perf_counter()
    created = call("POST", f"/api/v1/namespaces/{ns}/pods", pod(f"{run}-{i}", ["/bin/true"]))
    wait_for([f"{run}-{i}"], ("Succeeded", "Failed"), created["metadata"]["resourceVersion"])
    delete(f"{run}-{i}")
    times.append((time.perf_counter() - t) * 1e3)
print(f"cluster floor: pod of /bin/true created, seen Succeeded, deleted median={statistics.median(times):.1f}ms")

times = []
for r in range(max(3, n // 2)):
    names = [f"{run}-x4-{r}-{k}" for k in range(4)]
    t = time.perf_counter()
    rvs = []
    threads = [threading.Thread(target=lambda nm=nm: rvs.append(
        int(call("POST", f"/api/v1/namespaces/{ns}/pods", pod(nm, ["/bin/sleep", "30"]))["metadata"]["resourceVersion"])))
        for nm in names]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wait_for(names, ("Running",), min(rvs) - 1)
    times.append((time.perf_counter() - t) * 1e3)
    for nm in names:
        delete(nm)
print(f"cluster floor x4: four pods created in parallel until all run median={statistics.median(times):.1f}ms")
