#!/usr/bin/python3
"""Runs a test binary as the master inside a pod of the test Kubernetes cluster (or of the API
double), so that the suite's children are pods made through the pod's service account `fiber`,
with owner references to this pod.

    in_pod.py STATE_DIR BUILD_DIR BINARY [ARGS...]

STATE_DIR is the cluster's folder (build/engines/k8s; the fault injector's: build/engines/kubernetes),
with its url, CA and the service account's token. The pod runs the test image with the
host's /usr, /tmp and BUILD_DIR at the same paths (as the kubernetes run's worker pods do), the
downward-API variables a master in a pod needs (FIBER_POD_NAME, _UID, _IP), and
shareProcessNamespace (an init reaps what the suite orphans). Streams the binary's output;
tests/gtest_verdict.py judges the run from gtest's XML report, which the binary writes to a folder
of this run's own under the shared /tmp: it passes only when at least one test ran and none
failed, and exits 77 (skipped, with the reason) when every test skipped; the report is kept for
scripts/test_summary.py under FIBERTEST_RESULTS_DIR. 77 too when no cluster runs and engines are
not required. Standard library only: Debian's /usr/bin/python3.
"""
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gtest_verdict  # noqa: E402

state, build, binary, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
ns = "default"


def required():
    v = os.environ.get("FIBER_REQUIRE_ENGINES", os.environ.get("CI", ""))
    return v not in ("", "0", "false")


if not os.path.exists(os.path.join(state, "ready")):
    print(f"no Kubernetes test cluster runs (no {state}/ready): scripts/engines.sh start kubernetes brings one up")
    sys.exit(1 if required() else 77)

server = open(os.path.join(state, "url")).read().strip()
token_file = os.path.join(state, "token")
tls = ssl.create_default_context(cafile=os.path.join(state, "ca.crt"))


def call(method, path, body=None, stream=False, timeout=60):
    for attempt in (1, 2):
        req = urllib.request.Request(server + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + open(token_file).read().strip(),
                                              "Content-Type": "application/json"})
        try:
            r = urllib.request.urlopen(req, context=tls, timeout=timeout)
        except urllib.error.HTTPError as e:
            if e.code == 401 and attempt == 1:  # another test rotated the token after it was read
                continue
            raise
        return r if stream else json.loads(r.read() or b"null")


# The pod runs the test image: a real cluster's nodes pull the one its folder names from the test
# registry; the fault injector's pods use the test dockerd's own, which the engine gets the way the
# suites' own runs do.
image = open(os.path.join(state, "image")).read().strip() if os.path.exists(os.path.join(state, "image")) \
    else "fiber-test-root"
prepared = subprocess.run([binary], env=dict(os.environ, FIBERTEST_PREPARE_IMAGE="1"))
if prepared.returncode != 0:
    sys.exit(1)

work = tempfile.mkdtemp(prefix="fiber-in-pod-", dir="/tmp")
report = os.path.join(work, "report.xml")
suite = os.path.basename(binary).replace("_", "-")[:30].strip("-")
name = f"fiber-test-master-{suite}-{os.getpid()}"
field = lambda n, p: {"name": n, "valueFrom": {"fieldRef": {"fieldPath": p}}}
mounts = [("usr", "/usr", True), ("tmp", "/tmp", False), ("build", build, True)]
pod = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": name, "labels": {"fiber.test": "master-in-pod"}},
    "spec": {
        "restartPolicy": "Never",
        "serviceAccountName": "fiber",  # the Role of containers/kubernetes/rbac.yaml, and no more
        "shareProcessNamespace": True,
        "terminationGracePeriodSeconds": 5,
        "containers": [{
            "name": "master", "image": image, "command": [binary] + args + [f"--gtest_output=xml:{report}"],
            "env": [{"name": "FIBERTEST_BACKEND", "value": "kubernetes"},
                    {"name": "FIBERTEST_KUBE_DIR", "value": state}]
                   + [{"name": k, "value": v} for k, v in os.environ.items()
                      if k in ("CI", "FIBER_REQUIRE_ENGINES", "GTEST_COLOR", "FIBER_LOG_LEVEL")]
                   + [field("FIBER_POD_NAME", "metadata.name"), field("FIBER_POD_UID", "metadata.uid"),
                      field("FIBER_POD_NAMESPACE", "metadata.namespace"), field("FIBER_POD_IP", "status.podIP")],
            "volumeMounts": [{"name": n, "mountPath": p, "readOnly": ro} for n, p, ro in mounts],
        }],
        "volumes": [{"name": n, "hostPath": {"path": p}} for n, p, _ in mounts],
    },
}


def delete():
    try:
        call("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", {"gracePeriodSeconds": 0})
    except urllib.error.HTTPError as e:
        if e.code != 404:
            print(f"[in_pod: could not delete pod {name}: {e.code}]")


def stopped(sig, frame):
    delete()
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(128 + sig)


signal.signal(signal.SIGTERM, stopped)
signal.signal(signal.SIGINT, stopped)

call("POST", f"/api/v1/namespaces/{ns}/pods", pod)
hopeless = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
            "CreateContainerError", "RunContainerError"}


def until(check):
    """The pod's state until check(pod) says something: a fresh read, then a watch from it for a
    change (a watch may end early: another test compacts the history)."""
    while True:
        try:
            p = call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return check(None)
            raise
        said = check(p)
        if said is not None:
            return said
        try:
            watch = call("GET", f"/api/v1/namespaces/{ns}/pods?watch=1&labelSelector=fiber.test%3Dmaster-in-pod"
                                f"&resourceVersion={p['metadata']['resourceVersion']}&timeoutSeconds=30",
                         stream=True, timeout=60)
        except urllib.error.HTTPError as e:
            if e.code == 410:  # another test compacted the history since the read: read again
                continue
            raise
        for line in watch:
            if json.loads(line)["object"].get("metadata", {}).get("name") == name:
                break
        watch.close()


def states(p):
    return [s.get("state", {}) for s in (p.get("status", {}).get("containerStatuses") or [])]


def started(p):
    if p is None:
        return "the pod was deleted"
    waiting = [s["waiting"] for s in states(p) if "waiting" in s]
    if any(w.get("reason") in hopeless for w in waiting):
        return "; ".join(f"{w['reason']}: {w.get('message', '')}" for w in waiting)
    if any("running" in s or "terminated" in s for s in states(p)):
        return ""
    return None


def exit_code(p):
    if p is None:
        return "deleted"
    ended = [s["terminated"]["exitCode"] for s in states(p) if "terminated" in s]
    return ended[0] if ended else None


code = None
try:
    why = until(started)
    if not why:
        # Its output as it comes; the stream ends with the container.
        log = call("GET", f"/api/v1/namespaces/{ns}/pods/{name}/log?follow=true", stream=True, timeout=1200)
        for chunk in iter(lambda: log.read1(65536), b""):
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
        code = until(exit_code)
        if code == "deleted":
            code, why = None, "the pod was deleted"
finally:
    delete()
if code is None:
    print(f"[in_pod: the master's pod {name} did not run: {why or 'no exit code reported'}]")
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(1)
print(f"[in_pod: the master's pod {name} exited with {code}]")
results = os.environ.get("FIBERTEST_RESULTS_DIR")
keep = [os.path.join(results, f"{os.path.basename(binary)}--kubernetes-pod--{os.getpid()}-{time.time_ns()}.xml")] if results else []
rc = gtest_verdict.main(["gtest_verdict.py", report, str(code)] + keep)
shutil.rmtree(work, ignore_errors=True)
sys.exit(rc)
