#!/usr/bin/python3
"""A Kubernetes API server that this project wrote, kept as a FAULT INJECTOR for the faults no
real server makes on demand (tests/kubernetes_faults_test.cpp). Everything else of the
Kubernetes backend and the `fiber` command is tested against the real test cluster
(scripts/kubernetes_cluster.sh); nothing here is the reference for how Kubernetes behaves.

It answers the part of the core/v1 API the backend uses (HTTPS with a CA of its own, bearer
tokens): pods create, get, list, watch, delete, deletecollection and pods/log; events; nodes;
serviceaccounts; secrets create, get and delete (mounted as secret volumes); discovery. Its kubelet part runs every pod as a real container on the test
Docker engine (image pulls from the registry an image names, the downward API, the service
account volume, pod IPs on a Docker network of its own), its scheduler refuses what no node has,
and its garbage collector deletes pods whose owner pod is gone. resourceVersions, watches from a
resourceVersion with bookmarks, 410 Gone after compaction, Status bodies and graceful deletes
(grace 0 removes the object at once) are kept as the real server has them.

The faults, steered through /double/... (admin token only): deny a verb (in one namespace),
throttle with 429 and Retry-After (one namespace's requests), change a node (its room, cordoned),
silence the kubelets for one namespace's pods (they report nothing and stop nothing, as on a node
that is gone), rotate the token, compact history, read the request log.

    fault_injector.py --state DIR [--port N] [--network NAME --subnet CIDR] [--nodes 2]
writes DIR/kubeconfig, DIR/token, DIR/admin-token, DIR/ca.crt, DIR/url, then DIR/ready.
"""
import argparse
import base64
import bisect
import datetime
import http.client
import http.server
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse
import uuid

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
IMAGE_REF = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*(:[\w][\w.-]{0,127})?(@sha256:[a-f0-9]{64})?$")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                 "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
             "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


class api_error(Exception):
    """A `Status` answer."""

    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details, self.headers = code, reason, message, details, headers or {}

    def status(self):
        s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
             "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            s["details"] = self.details
        return s


def invalid(kind, name, causes):
    """422 as the real server words it: every bad field, with the rule it breaks."""
    text = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    if len(causes) > 1:
        text = "[" + text + "]"
    return api_error(422, "Invalid", f'{kind} "{name}" is invalid: {text}',
                     {"name": name, "kind": kind.lower() + "s",
                      "causes": [{"reason": "FieldValueInvalid", "message": c["message"], "field": c["field"]}
                                 for c in causes]})


# ---------------------------------------------------------------- quantities


def kube_expand(text, defined):
    """What the kubelet makes of a container's command, argument or env value: $$ is $, $(NAME) of
    a variable defined before it is its value, anything else stays as written."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        if text.startswith("$(", i):
            end = text.find(")", i + 2)
            if end != -1:
                name = text[i + 2:end]
                out.append(defined[name] if name in defined else text[i:end + 1])
                i = end + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def parse_quantity(q):
    """A resource quantity ("500m", "2", "512Mi", "1G") as a float; ValueError when it is not one."""
    s = str(q)
    m = re.fullmatch(r"([+-]?[0-9.]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e[0-9]+)?", s)
    if not m:
        raise ValueError(s)
    n = float(m.group(1))
    suffix = m.group(2) or ""
    mult = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
    if suffix.startswith("e"):
        return n * 10 ** int(suffix[1:])
    return n * mult[suffix]


# ---------------------------------------------------------------- the Docker engine


class docker:
    """The Engine API over its unix socket: what the kubelet part needs."""

    def __init__(self, sock="/var/run/docker.sock"):
        self.sock = sock

    def _conn(self, timeout):
        c = http.client.HTTPConnection("localhost", timeout=timeout)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.sock)
        c.sock = s
        return c

    def call(self, method, path, body=None, timeout=60, raw=False):
        c = self._conn(timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, "/v1.41" + path, body=data, headers={"Content-Type": "application/json"} if data else {})
            r = c.getresponse()
            out = r.read()
            if raw:
                return r.status, out
            return r.status, (json.loads(out) if out and out[:1] in (b"{", b"[") else out.decode(errors="replace"))
        finally:
            c.close()

    def stream(self, path):
        """A streaming GET: yields raw body chunks until the engine closes it."""
        c = self._conn(None)
        c.request("GET", "/v1.41" + path)
        r = c.getresponse()
        try:
            while True:
                b = r.read1(65536) if hasattr(r, "read1") else r.read(65536)
                if not b:
                    break
                yield b
        finally:
            c.close()


def demux(buf):
    """The engine's multiplexed log stream → (complete payload bytes, rest)."""
    out = b""
    while len(buf) >= 8:
        n = int.from_bytes(buf[4:8], "big")
        if len(buf) < 8 + n:
            break
        out += buf[8:8 + n]
        buf = buf[8 + n:]
    return out, buf


# ---------------------------------------------------------------- the store


class store:
    """Objects by (resource, namespace, name), one resourceVersion counter, and a bounded
    history of events for watches."""

    def __init__(self):
        self.lock = threading.Condition()
        # resource -> {(ns, name): obj}: a list of pods must not walk (or sort) the events, which
        # pile up over a long test run.
        self.objects = {}
        self.rv = 1000
        self.history = []  # (rv, resource, type, obj copy)
        self.oldest = self.rv  # a watch from an rv below this gets 410
        self.generation = 0  # bumped by compact: open watches end

    def _bump(self, resource, typ, obj):
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, resource, typ, json.loads(json.dumps(obj))))
        if len(self.history) > 20000:
            drop = len(self.history) - 15000
            self.oldest = self.history[drop][0] - 1
            del self.history[:drop]
        self.lock.notify_all()

    def add(self, resource, obj):
        m = obj["metadata"]
        self.objects.setdefault(resource, {})[(m["namespace"], m["name"])] = obj
        self._bump(resource, "ADDED", obj)

    def modify(self, resource, obj):
        self._bump(resource, "MODIFIED", obj)

    def remove(self, resource, obj):
        m = obj["metadata"]
        self.objects.get(resource, {}).pop((m["namespace"], m["name"]), None)
        self._bump(resource, "DELETED", obj)

    def get(self, resource, ns, name):
        return self.objects.get(resource, {}).get((ns, name))

    def items(self, resource, ns=None):
        return [o for (n, _), o in sorted(self.objects.get(resource, {}).items()) if ns is None or n == ns]

    def since(self, rv):
        """The history after rv: a watch woken by a change reads only what is new (history is
        in rv order), not the whole window; every watch wakes on every change."""
        return self.history[bisect.bisect_right(self.history, rv, key=lambda h: h[0]):]

    def compact(self):
        self.oldest = self.rv
        self.history.clear()
        self.generation += 1
        self.lock.notify_all()


def parse_label_selector(text):
    """Equality- and set-based selectors: a=b, a==b, a!=b, a, !a, a in (x,y), a notin (x)."""
    reqs = []
    if not text:
        return reqs
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for p in (p.strip() for p in parts):
        m = re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", p)
        if m:
            reqs.append((m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}))
        elif "!=" in p:
            k, v = p.split("!=", 1)
            reqs.append((k.strip(), "!=", v.strip()))
        elif "==" in p or "=" in p:
            k, v = re.split("==?", p, maxsplit=1)
            reqs.append((k.strip(), "=", v.strip()))
        elif p.startswith("!"):
            reqs.append((p[1:].strip(), "!exists", None))
        elif re.fullmatch(r"[\w./-]+", p):
            reqs.append((p, "exists", None))
        else:
            raise api_error(400, "BadRequest", f'unable to parse requirement: found \'{p}\', expected: identifier')
    return reqs


def labels_match(reqs, labels):
    labels = labels or {}
    for k, op, v in reqs:
        have = labels.get(k)
        if op == "=" and have != v or op == "!=" and have == v:
            return False
        if op == "exists" and k not in labels or op == "!exists" and k in labels:
            return False
        if op == "in" and have not in v or op == "notin" and have in v:
            return False
    return True


def field_value(obj, path):
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return "" if cur is None else str(cur)


def parse_field_selector(text, allowed):
    reqs = []
    for p in filter(None, (text or "").split(",")):
        neg = "!=" in p
        k, v = re.split("!=|==?", p, maxsplit=1)
        if k not in allowed:
            raise api_error(400, "BadRequest", f'"{k}" is not a known field selector: only "{", ".join(allowed)}"')
        reqs.append((k, neg, v))
    return reqs


def fields_match(reqs, obj):
    return all((field_value(obj, k) == v) != neg for k, neg, v in reqs)


# ---------------------------------------------------------------- the cluster


class cluster:
    def __init__(self, args, state_dir):
        self.args = args
        self.state_dir = state_dir
        self.s = store()
        self.engine = docker()
        self.token = secrets.token_hex(16)
        self.admin_token = secrets.token_hex(16)
        self.denied = set()  # (verb, resource)
        self.silenced = set()  # namespaces whose pods' kubelets say and do nothing
        self.throttle = {"count": 0, "retry_after": 1}
        self.requests = []
        self.instance = secrets.token_hex(4)
        self.nodes = [{"name": f"double-node-{i + 1}", "cpu": args.node_cpus, "memory": args.node_memory_mi * 2**20,
                       "gpu": 0, "uid": str(uuid.uuid4()), "created": now()} for i in range(args.nodes)]
        net = ipaddress.ip_network(args.subnet)
        hosts = list(net.hosts())
        self.gateway = str(hosts[0])
        self.free_ips = [str(h) for h in hosts[1:]]
        # Namespace default's accounts: its own, and fiber's as containers/kubernetes/rbac.yaml
        # makes it (the fault injector does not enforce RBAC beyond /double/deny).
        for sa in ("default", "fiber"):
            with self.s.lock:
                self.s.add("serviceaccounts", {"kind": "ServiceAccount", "apiVersion": "v1", "metadata": {
                    "name": sa, "namespace": "default", "uid": str(uuid.uuid4()), "creationTimestamp": now()}})
        self.sa_dir = os.path.join(state_dir, "serviceaccount")
        os.makedirs(self.sa_dir, exist_ok=True)
        self.write_token()

    # ------------------------------------------------ tokens

    def write_token(self):
        for path in (os.path.join(self.state_dir, "token"), os.path.join(self.sa_dir, "token")):
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write(self.token)
            os.replace(tmp, path)

    def rotate(self):
        with self.s.lock:
            self.token = secrets.token_hex(16)
            self.write_token()

    # ------------------------------------------------ events

    def event(self, pod, typ, reason, message, component="kubelet"):
        """An event about a pod."""
        m = pod["metadata"]
        ns = m["namespace"]
        name = f"{m['name']}.{secrets.token_hex(8)}"
        ev = {"kind": "Event", "apiVersion": "v1",
              "metadata": {"name": name, "namespace": ns, "uid": str(uuid.uuid4()), "creationTimestamp": now()},
              "involvedObject": {"kind": pod.get("kind", "Pod"), "namespace": ns, "name": m["name"], "uid": m["uid"],
                                 "apiVersion": pod.get("apiVersion", "v1"), "resourceVersion": m.get("resourceVersion", "")},
              "reason": reason, "message": message, "type": typ, "count": 1,
              "firstTimestamp": now(), "lastTimestamp": now(), "source": {"component": component}}
        with self.s.lock:
            self.s.add("events", ev)

    # ------------------------------------------------ pods

    def validate_pod(self, pod):
        m = pod.get("metadata") or {}
        name = m.get("name") or (m.get("generateName", "") + "xxxxx")
        causes = []
        if not m.get("name") and not m.get("generateName"):
            causes.append({"field": "metadata.name", "message": "Required value: name or generateName is required"})
        elif len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
            causes.append({"field": "metadata.name", "message": f'Invalid value: "{name}": {SUBDOMAIN_MSG}'})
        for k, v in (m.get("labels") or {}).items():
            key = k.split("/")[-1]
            if not LABEL_NAME.match(key) or len(key) > 63:
                causes.append({"field": "metadata.labels", "message": f'Invalid value: "{k}": name part must consist of alphanumeric characters, \'-\', \'_\' or \'.\''})
            if not isinstance(v, str) or len(v) > 63 or not LABEL_VALUE.match(v):
                causes.append({"field": "metadata.labels", "message": f'Invalid value: "{v}": a valid label must be an empty string or consist of alphanumeric characters, \'-\', \'_\' or \'.\', and must start and end with an alphanumeric character, and at most 63 characters'})
        spec = pod.get("spec") or {}
        containers = spec.get("containers") or []
        if not containers:
            causes.append({"field": "spec.containers", "message": "Required value"})
        volumes = {v.get("name") for v in spec.get("volumes") or []}
        for i, v in enumerate(spec.get("volumes") or []):
            if not DNS1123_LABEL.match(v.get("name") or ""):
                causes.append({"field": f"spec.volumes[{i}].name", "message": f'Invalid value: "{v.get("name")}": {LABEL_MSG}'})
        for i, c in enumerate(containers):
            if not DNS1123_LABEL.match(c.get("name") or ""):
                causes.append({"field": f"spec.containers[{i}].name", "message": f'Invalid value: "{c.get("name")}": {LABEL_MSG}'})
            if not c.get("image"):
                causes.append({"field": f"spec.containers[{i}].image", "message": "Required value"})
            res = c.get("resources") or {}
            for part in ("requests", "limits"):
                for rk, rv in (res.get(part) or {}).items():
                    try:
                        parse_quantity(rv)
                    except ValueError:
                        causes.append({"field": f"spec.containers[{i}].resources.{part}[{rk}]",
                                       "message": f'Invalid value: "{rv}": quantities must match the regular expression \'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$\''})
            for rk, rv in (res.get("requests") or {}).items():
                lim = (res.get("limits") or {}).get(rk)
                if "/" in rk and rk not in ("kubernetes.io/", ) and lim is not None and parse_quantity(lim) != parse_quantity(rv):
                    causes.append({"field": f"spec.containers[{i}].resources.requests[{rk}]",
                                   "message": f'Invalid value: "{rv}": must be equal to {rk} limit of {lim}'})
                if lim is not None and parse_quantity(rv) > parse_quantity(lim):
                    causes.append({"field": f"spec.containers[{i}].resources.requests",
                                   "message": f'Invalid value: "{rv}": must be less than or equal to {rk} limit of {lim}'})
            for j, vm in enumerate(c.get("volumeMounts") or []):
                if vm.get("name") not in volumes:
                    causes.append({"field": f"spec.containers[{i}].volumeMounts[{j}].name",
                                   "message": f'Not found: "{vm.get("name")}"'})
        rp = spec.get("restartPolicy", "Always")
        if rp not in ("Always", "OnFailure", "Never"):
            causes.append({"field": "spec.restartPolicy", "message": f'Unsupported value: "{rp}": supported values: "Always", "OnFailure", "Never"'})
        if causes:
            raise invalid("Pod", name, causes)

    def create_pod(self, ns, pod):
        self.validate_pod(pod)
        m = pod.setdefault("metadata", {})
        with self.s.lock:
            if not m.get("name"):
                m["name"] = m["generateName"] + secrets.token_hex(3)[:5]
            if self.s.get("pods", ns, m["name"]):
                raise api_error(409, "AlreadyExists", f'pods "{m["name"]}" already exists',
                                {"name": m["name"], "kind": "pods"})
            if m.get("namespace", ns) != ns:
                raise api_error(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request")
            m.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=now())
            pod["kind"], pod["apiVersion"] = "Pod", "v1"
            spec = pod["spec"]
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("serviceAccountName", "default")
            pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}
            self.s.add("pods", pod)
            snapshot = json.loads(json.dumps(pod))
        threading.Thread(target=self.kubelet, args=(ns, m["name"], m["uid"]), daemon=True).start()
        return snapshot

    def live_pod(self, ns, name, uid):
        p = self.s.get("pods", ns, name)
        return p if p and p["metadata"]["uid"] == uid else None

    def silent_node(self, p):
        """The pod's kubelet has stopped answering (a test's /double/silence, for the pods of one
        namespace so that tests beside it go on): it reports nothing and acts on no delete, as on a
        node that is gone."""
        return p["metadata"]["namespace"] in self.silenced

    def update_status(self, ns, name, uid, fn):
        """Applies fn(pod) under the lock; False once the pod is gone or being deleted."""
        with self.s.lock:
            p = self.live_pod(ns, name, uid)
            if not p:
                return False
            if self.silent_node(p):
                return "deletionTimestamp" not in p["metadata"]
            fn(p)
            self.s.modify("pods", p)
            return "deletionTimestamp" not in p["metadata"]

    def node_object(self, n):
        cpu = n["cpu"]
        room = {"cpu": str(int(cpu)) if float(cpu).is_integer() else f"{int(round(cpu * 1000))}m",
                "memory": f"{int(n['memory']) // 1024}Ki", "pods": "110"}
        if n["gpu"]:
            room[self.args.gpu_resource] = str(int(n["gpu"]))
        return {"kind": "Node", "apiVersion": "v1",
                "metadata": {"name": n["name"], "uid": n["uid"], "creationTimestamp": n["created"],
                             "labels": {"kubernetes.io/hostname": n["name"], "kubernetes.io/os": "linux"}},
                "spec": {"unschedulable": True} if n.get("cordoned") else {},
                "status": {"capacity": dict(room), "allocatable": dict(room),
                           "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}

    def schedule(self, pod):
        """A node with room for the pod's requests, or the scheduler's reason there is none."""
        want = pod_requests(pod["spec"])
        used = {n["name"]: {"cpu": 0.0, "memory": 0.0, "gpu": 0.0} for n in self.nodes}
        for p in self.s.items("pods"):
            node = p["spec"].get("nodeName")
            if node in used and p["status"].get("phase") in ("Pending", "Running") and p is not pod:
                for k, v in pod_requests(p["spec"]).items():
                    used[node][k] += v
        short = {}
        for n in self.nodes:
            if n.get("cordoned"):
                short["cordoned"] = short.get("cordoned", 0) + 1
                continue
            lacking = [k for k, v in want.items() if v > 0 and used[n["name"]][k] + v > n[k] + 1e-9]
            if not lacking:
                return n["name"], None
            for k in lacking:
                short[k] = short.get(k, 0) + 1
        words = {"cpu": "Insufficient cpu", "memory": "Insufficient memory", "gpu": f"Insufficient {self.args.gpu_resource}",
                 "cordoned": "node(s) were unschedulable"}
        parts = ", ".join(f"{c} {words[k]}" for k, c in sorted(short.items(), key=lambda kv: words[kv[0]]))
        total = len(self.nodes)
        return None, (f"0/{total} nodes are available: {parts}. preemption: 0/{total} nodes are available: "
                      f"{total} No preemption victims found for incoming pod.")

    def kubelet(self, ns, name, uid):
        try:
            self._kubelet(ns, name, uid)
        except Exception:
            log("kubelet", ns, name, traceback.format_exc())

    def _kubelet(self, ns, name, uid):
        # The scheduler: retried while the pod exists, as the real one retries unschedulable pods.
        reported = None
        while True:
            with self.s.lock:
                p = self.live_pod(ns, name, uid)
                if not p or "deletionTimestamp" in p["metadata"]:
                    return self.finish_delete(ns, name, uid)
                node, why = self.schedule(p)
                if node and not self.free_ips:
                    node, why = None, ('Failed to create pod sandbox: plugin type="bridge" failed (add): failed to '
                                       'allocate for range 0: no IP addresses available in range set')
                if node:
                    p["spec"]["nodeName"] = node
                    ip = self.free_ips.pop(0)
                    p["status"].update(conditions=[{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}],
                                       podIP=ip, podIPs=[{"ip": ip}], hostIP=self.gateway, startTime=now())
                    self.s.modify("pods", p)
                    self.event(p, "Normal", "Scheduled", f"Successfully assigned {ns}/{name} to {node}", "default-scheduler")
                    pod = json.loads(json.dumps(p))
                    break
                if why != reported:
                    reported = why
                    p["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                  "message": why, "lastTransitionTime": now()}]
                    self.s.modify("pods", p)
                    self.event(p, "Warning", "FailedScheduling", why, "default-scheduler")
                # Once a second, not on every change in the store (every change wakes waiters).
                retry = time.time() + 1.0
                self.s.lock.wait_for(lambda: time.time() >= retry, 1.0)
        c = pod["spec"]["containers"][0]
        cname = c["name"]

        def waiting(reason, message):
            def fn(p):
                p["status"]["containerStatuses"] = [{"name": cname, "image": c["image"], "imageID": "", "ready": False,
                                                     "restartCount": 0, "started": False,
                                                     "state": {"waiting": {"reason": reason, "message": message}},
                                                     "lastState": {}}]
            return fn

        image = c["image"]
        if not IMAGE_REF.match(image):
            msg = f'Failed to apply default image tag "{image}": couldn\'t parse image reference "{image}": invalid reference format'
            self.update_status(ns, name, uid, waiting("InvalidImageName", msg))
            self.event(pod, "Warning", "InspectFailed", msg)
            return self.wait_for_delete(ns, name, uid)
        status, _ = self.engine.call("GET", f"/images/{urllib.parse.quote(image, safe='')}/json")
        if status != 200 and c.get("imagePullPolicy") != "Never" and names_registry(image):
            # IfNotPresent. Only from a registry the reference names: the test machines reach no
            # public one, and a pull from Docker Hub would only wait for its failure.
            self.event(pod, "Normal", "Pulling", f'Pulling image "{image}"')
            self.update_status(ns, name, uid, waiting("ContainerCreating", ""))
            started = time.time()
            ref = image if ("@" in image or ":" in image.rsplit("/", 1)[-1]) else image + ":latest"
            self.engine.call("POST", "/images/create?fromImage=" + urllib.parse.quote(ref, safe=""), timeout=600, raw=True)
            status, _ = self.engine.call("GET", f"/images/{urllib.parse.quote(image, safe='')}/json")
            if status == 200:
                self.event(pod, "Normal", "Pulled", f'Successfully pulled image "{image}" in {time.time() - started:.3f}s')
        elif status == 200:
            self.event(pod, "Normal", "Pulled", f'Container image "{image}" already present on machine')
        if status != 200:
            msg = (f'rpc error: code = Unknown desc = failed to pull and unpack image "{image}": failed to resolve '
                   f'reference "{image}": pull access denied, repository does not exist or may require authorization')
            self.update_status(ns, name, uid, waiting("ErrImagePull", msg))
            self.event(pod, "Warning", "Failed", f'Failed to pull image "{image}": {msg}')
            with self.s.lock:
                retry = time.time() + 1.0
                self.s.lock.wait_for(lambda: time.time() >= retry, 1.0)
            self.update_status(ns, name, uid, waiting("ImagePullBackOff", f'Back-off pulling image "{image}"'))
            self.event(pod, "Normal", "BackOff", f'Back-off pulling image "{image}"')
            return self.wait_for_delete(ns, name, uid)
        try:
            body = self.container_body(pod, c)
        except api_error as e:
            self.update_status(ns, name, uid, waiting("CreateContainerConfigError", e.message))
            self.event(pod, "Warning", "Failed", f"Error: {e.message}")
            return self.wait_for_delete(ns, name, uid)
        self.update_status(ns, name, uid, waiting("ContainerCreating", ""))
        cid_name = f"k8s_{cname}_{name}_{ns}_{uid}_0"
        status, out = self.engine.call("POST", "/containers/create?name=" + cid_name, body)
        if status != 201:
            self.update_status(ns, name, uid, waiting("CreateContainerError", str(out)))
            self.event(pod, "Warning", "Failed", f"Error: {out}")
            return self.wait_for_delete(ns, name, uid)
        cid = out["Id"]
        with self.s.lock:
            p = self.live_pod(ns, name, uid)
            if p:
                p.setdefault("_container", cid)  # not part of the object: dropped from answers
            # Deleted while its container was being made (delete_pod saw no container to stop):
            # the kubelet does not start it.
            deleted = not p or "deletionTimestamp" in p["metadata"]
        if deleted:
            self.engine.call("DELETE", f"/containers/{cid}?force=1&v=1")
            return self.finish_delete(ns, name, uid)
        status, out = self.engine.call("POST", f"/containers/{cid}/start")
        if status not in (204, 304):
            self.update_status(ns, name, uid, waiting("RunContainerError", str(out)))
            self.event(pod, "Warning", "Failed", f"Error: {out}")
            return self.wait_for_delete(ns, name, uid)

        def running(p):
            p["status"]["phase"] = "Running"
            p["status"]["conditions"] = [{"type": t, "status": "True", "lastTransitionTime": now()}
                                         for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]
            p["status"]["containerStatuses"] = [{"name": cname, "image": image, "imageID": "docker-pullable://" + image,
                                                 "containerID": "docker://" + cid, "ready": True, "restartCount": 0,
                                                 "started": True, "state": {"running": {"startedAt": now()}},
                                                 "lastState": {}}]
        if self.update_status(ns, name, uid, running):
            self.event(pod, "Normal", "Started", f"Started container {cname}")
        status, out = self.engine.call("POST", f"/containers/{cid}/wait", timeout=None)
        code = out.get("StatusCode", 255) if isinstance(out, dict) else 255
        _, info = self.engine.call("GET", f"/containers/{cid}/json")
        oom = isinstance(info, dict) and info.get("State", {}).get("OOMKilled")
        reason = "OOMKilled" if oom else ("Completed" if code == 0 else "Error")
        message = None
        if code == 127 and body["HostConfig"].get("Init"):
            # The engine's init could not exec the command: a real runtime fails the start itself.
            _, logs = self.engine.call("GET", f"/containers/{cid}/logs?stderr=1", raw=True)
            text, _ = demux(logs)
            if b"exec" in text and b"failed" in text:
                exe = (c.get("command") or [""])[0]
                code, reason = 128, "StartError"
                message = (f'failed to create containerd task: failed to create shim task: OCI runtime create failed: '
                           f'runc create failed: unable to start container process: exec: "{exe}": stat {exe}: '
                           f'no such file or directory: unknown')

        def terminated(p):
            p["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
            p["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "PodCompleted",
                                          "lastTransitionTime": now()}]
            p["status"]["containerStatuses"] = [{"name": cname, "image": image, "imageID": "docker-pullable://" + image,
                                                 "containerID": "docker://" + cid, "ready": False, "restartCount": 0,
                                                 "started": False, "lastState": {},
                                                 "state": {"terminated": dict(
                                                     {"exitCode": code, "reason": reason, "startedAt": now(),
                                                      "finishedAt": now(), "containerID": "docker://" + cid},
                                                     **({"message": message} if message else {}))}}]
        self.update_status(ns, name, uid, terminated)
        return self.wait_for_delete(ns, name, uid)

    def secret_volume(self, m, v):
        """A secret volume as the kubelet makes it: a folder of the pod's own with one file per key,
        of the volume's defaultMode (0644 when unset); a Secret that is not there fails the start."""
        name = v["secret"]["secretName"]
        with self.s.lock:
            secret = self.s.get("secrets", m["namespace"], name)
            data = dict((secret or {}).get("data") or {})
        if secret is None:
            raise api_error(404, "NotFound", f'secret "{name}" not found')
        folder = os.path.join(self.state_dir, "secret-volumes", m["uid"] + "-" + v["name"])
        os.makedirs(folder, exist_ok=True)
        for key, value in data.items():
            path = os.path.join(folder, key)
            with open(path, "wb") as f:
                f.write(base64.b64decode(value))
            os.chmod(path, v["secret"].get("defaultMode", 0o644))
        return folder

    def create_secret(self, ns, obj):
        m = obj.setdefault("metadata", {})
        with self.s.lock:
            if self.s.get("secrets", ns, m.get("name")):
                raise api_error(409, "AlreadyExists", f'secrets "{m["name"]}" already exists',
                                {"name": m["name"], "kind": "secrets"})
            m.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=now())
            obj["kind"], obj["apiVersion"] = "Secret", "v1"
            data = obj.setdefault("data", {})
            for key, value in (obj.pop("stringData", None) or {}).items():
                data[key] = base64.b64encode(value.encode()).decode()
            self.s.add("secrets", obj)
            return json.loads(json.dumps(obj))

    def delete_secret(self, ns, name):
        with self.s.lock:
            secret = self.s.get("secrets", ns, name)
            if not secret:
                raise api_error(404, "NotFound", f'secrets "{name}" not found', {"name": name, "kind": "secrets"})
            self.s.remove("secrets", secret)
            return json.loads(json.dumps(secret))

    def container_body(self, pod, c):
        m, spec = pod["metadata"], pod["spec"]
        env = []
        defined = {}
        for e in c.get("env") or []:
            if "value" in e:
                value = kube_expand(e["value"], defined)
                defined[e["name"]] = value
                env.append(f"{e['name']}={value}")
            elif "valueFrom" in e:
                src = e["valueFrom"]
                if "fieldRef" in src:
                    path = src["fieldRef"]["fieldPath"]
                    values = {"metadata.name": m["name"], "metadata.namespace": m["namespace"], "metadata.uid": m["uid"],
                              "status.podIP": pod["status"].get("podIP", ""), "status.hostIP": self.gateway,
                              "spec.nodeName": spec.get("nodeName", ""),
                              "spec.serviceAccountName": spec.get("serviceAccountName", "")}
                    env.append(f"{e['name']}={values.get(path, '')}")
                elif "secretKeyRef" in src:
                    raise api_error(404, "NotFound", f'secret "{src["secretKeyRef"].get("name")}" not found')
                elif "configMapKeyRef" in src:
                    raise api_error(404, "NotFound", f'configmap "{src["configMapKeyRef"].get("name")}" not found')
        env += [f"KUBERNETES_SERVICE_HOST={self.gateway}", f"KUBERNETES_SERVICE_PORT={self.port}",
                f"HOSTNAME={m['name']}"]
        binds = []
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        for vm in c.get("volumeMounts") or []:
            v = volumes[vm["name"]]
            ro = ":ro" if vm.get("readOnly") else ""
            if "hostPath" in v:
                binds.append(f"{v['hostPath']['path']}:{vm['mountPath']}{ro}")
            elif "emptyDir" in v:
                binds.append(f"{pvc_volume(m['namespace'], 'emptydir-' + m['uid'] + '-' + v['name'])}:{vm['mountPath']}")
            elif "secret" in v:
                binds.append(f"{self.secret_volume(m, v)}:{vm['mountPath']}:ro")
        if spec.get("automountServiceAccountToken", True):
            binds.append(f"{self.sa_dir}:/var/run/secrets/kubernetes.io/serviceaccount:ro")
        limits = (c.get("resources") or {}).get("limits") or {}
        host = {"Binds": binds, "NetworkMode": self.args.network}
        if spec.get("shareProcessNamespace"):
            # The pause container is the pod's pid 1 then; the engine's init plays its part.
            host["Init"] = True
        if "cpu" in limits:
            host["NanoCpus"] = int(parse_quantity(limits["cpu"]) * 1e9)
        if "memory" in limits:
            host["Memory"] = int(parse_quantity(limits["memory"]))
            host["MemorySwap"] = host["Memory"]
        body = {"Image": c["image"], "Env": env, "Hostname": m["name"][:63], "HostConfig": host,
                "Labels": {"io.kubernetes.pod.name": m["name"], "io.kubernetes.pod.namespace": m["namespace"],
                           "io.kubernetes.pod.uid": m["uid"], "kube-double": self.instance},
                "NetworkingConfig": {"EndpointsConfig": {self.args.network: {
                    "IPAMConfig": {"IPv4Address": pod["status"]["podIP"]}}}}}
        everything = dict(kv.split("=", 1) for kv in env)
        if c.get("command"):
            body["Entrypoint"] = [kube_expand(a, everything) for a in c["command"]]
        if c.get("args"):
            body["Cmd"] = [kube_expand(a, everything) for a in c["args"]]
        if c.get("workingDir"):
            body["WorkingDir"] = c["workingDir"]
        sc = c.get("securityContext") or {}
        if "runAsUser" in sc:
            body["User"] = str(sc["runAsUser"]) + (f":{sc['runAsGroup']}" if "runAsGroup" in sc else "")
        return body

    def wait_for_delete(self, ns, name, uid):
        with self.s.lock:
            while True:
                p = self.live_pod(ns, name, uid)
                if not p or "deletionTimestamp" in p["metadata"]:
                    break
                self.s.lock.wait()
        self.finish_delete(ns, name, uid)

    def finish_delete(self, ns, name, uid, report_first=False):
        """The kubelet's half of a delete: stop the container (SIGTERM, SIGKILL after the grace
        period), remove it, then the object goes. `report_first` (a delete from the API): a
        running container's exit is in the pod's status before the pod goes, as the real
        kubelet's status manager reports it before the final delete."""
        with self.s.lock:
            p = self.live_pod(ns, name, uid)
            if not p or self.silent_node(p):
                return
            grace = p["metadata"].get("deletionGracePeriodSeconds", 30)
            cid = p.get("_container")
            running = p["status"].get("phase") == "Running"
        if cid:
            self.engine.call("POST", f"/containers/{cid}/stop?t={int(grace)}", timeout=grace + 30)
            if report_first and running:
                # The pod's kubelet thread sees the container end and reports it.
                deadline = time.time() + 10
                with self.s.lock:
                    while time.time() < deadline:
                        p = self.live_pod(ns, name, uid)
                        if not p or p["status"].get("phase") in ("Succeeded", "Failed"):
                            break
                        self.s.lock.wait(0.5)
            self.engine.call("DELETE", f"/containers/{cid}?force=1&v=1")
        self.engine.call("DELETE", f"/volumes/{pvc_volume(ns, 'emptydir-' + uid)}")
        secret_root = os.path.join(self.state_dir, "secret-volumes")
        for folder in os.listdir(secret_root) if os.path.isdir(secret_root) else []:
            if folder.startswith(uid + "-"):
                shutil.rmtree(os.path.join(secret_root, folder), ignore_errors=True)
        with self.s.lock:
            p = self.live_pod(ns, name, uid)
            if not p:
                return
            ip = p["status"].get("podIP")
            self.s.remove("pods", p)
            if ip:
                self.free_ips.append(ip)
            self.collect_garbage(ns)

    def delete_pod(self, ns, name, grace=None, uid=None):
        with self.s.lock:
            p = self.s.get("pods", ns, name)
            if not p:
                raise api_error(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"})
            if uid and p["metadata"]["uid"] != uid:
                raise api_error(409, "Conflict", f'Operation cannot be fulfilled on Pod "{name}": the UID in the precondition ({uid}) does not match the UID in record ({p["metadata"]["uid"]}). The object might have been deleted and then recreated')
            if grace == 0:
                # As the real API server: a delete with grace 0 removes the object at once, without
                # the kubelet's word (kubectl delete --force); the container stops when the kubelet
                # gets to it.
                out = json.loads(json.dumps(p))
                cid = p.get("_container")
                ip = p["status"].get("podIP")
                self.s.remove("pods", p)
                if ip:
                    self.free_ips.append(ip)
                if cid:
                    threading.Thread(target=lambda: self.engine.call("DELETE", f"/containers/{cid}?force=1&v=1"),
                                     daemon=True).start()
                return out
            if "deletionTimestamp" not in p["metadata"]:
                g = p["spec"].get("terminationGracePeriodSeconds", 30) if grace is None else grace
                p["metadata"]["deletionTimestamp"] = now()
                p["metadata"]["deletionGracePeriodSeconds"] = g
                self.s.modify("pods", p)
                if p.get("_container"):  # its kubelet thread waits for the container: stop it from here
                    if p["status"].get("phase") == "Running":
                        self.event(p, "Normal", "Killing", f"Stopping container {p['spec']['containers'][0]['name']}")
                    threading.Thread(target=self.finish_delete, args=(ns, name, p["metadata"]["uid"], True),
                                     daemon=True).start()
            return json.loads(json.dumps(p))

    def collect_garbage(self, ns):
        """The garbage collector: a pod whose owner pod is gone is deleted."""
        uids = {p["metadata"]["uid"] for p in self.s.items("pods", ns)}
        for p in self.s.items("pods", ns):
            refs = [r for r in p["metadata"].get("ownerReferences") or [] if r.get("kind") == "Pod"]
            if refs and all(r.get("uid") not in uids for r in refs) and "deletionTimestamp" not in p["metadata"]:
                # Background propagation: an ordinary delete, the pod's own grace period.
                log("garbage collector: deleting", p["metadata"]["name"], "(its owner is gone)")
                self.delete_pod(ns, p["metadata"]["name"], uid=p["metadata"]["uid"])

    def gc_loop(self):
        while True:
            time.sleep(1)
            with self.s.lock:
                for ns in {p["metadata"]["namespace"] for p in self.s.items("pods")}:
                    self.collect_garbage(ns)

    def shutdown(self):
        """Removes every container and volume this double made."""
        st, out = self.engine.call("GET", "/containers/json?all=1&filters=" +
                                   urllib.parse.quote(json.dumps({"label": [f"kube-double={self.instance}"]})))
        for c in out if isinstance(out, list) else []:
            self.engine.call("DELETE", f"/containers/{c['Id']}?force=1&v=1")


def names_registry(image):
    """True when an image reference starts with a registry host (localhost, a dot or a port)."""
    first = image.split("/", 1)[0]
    return "/" in image and ("." in first or ":" in first or first == "localhost")


def pvc_volume(ns, claim):
    return f"kube-double-{ns}-{claim}"


def pod_requests(spec):
    want = {"cpu": 0.0, "memory": 0.0, "gpu": 0.0}
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        merged = dict(res.get("limits") or {})
        merged.update(res.get("requests") or {})
        for k, v in merged.items():
            if k == "cpu":
                want["cpu"] += parse_quantity(v)
            elif k == "memory":
                want["memory"] += parse_quantity(v)
            elif k.endswith("gpu") or "/mig-" in k:
                want["gpu"] += parse_quantity(v)
    return want


def qos_class(spec):
    cs = spec.get("containers") or []
    if all(not (c.get("resources") or {}).get("requests") and not (c.get("resources") or {}).get("limits") for c in cs):
        return "BestEffort"
    for c in cs:
        r = c.get("resources") or {}
        lim, req = r.get("limits") or {}, r.get("requests") or {}
        for k in ("cpu", "memory"):
            if k not in lim or parse_quantity(req.get(k, lim[k])) != parse_quantity(lim[k]):
                return "Burstable"
    return "Guaranteed"


def public(obj):
    return {k: v for k, v in obj.items() if not k.startswith("_")}


# ---------------------------------------------------------------- HTTP


API_RESOURCES = {
    "kind": "APIResourceList", "groupVersion": "v1",
    "resources": [
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "shortNames": ["po"],
         "verbs": ["create", "delete", "deletecollection", "get", "list", "watch"], "categories": ["all"]},
        {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
        {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node", "shortNames": ["no"],
         "verbs": ["get", "list"]},
        {"name": "events", "singularName": "event", "namespaced": True, "kind": "Event", "shortNames": ["ev"],
         "verbs": ["list", "watch"]},
        {"name": "serviceaccounts", "singularName": "serviceaccount", "namespaced": True, "kind": "ServiceAccount",
         "shortNames": ["sa"], "verbs": ["get", "list", "watch"]},
        {"name": "secrets", "singularName": "secret", "namespaced": True, "kind": "Secret",
         "verbs": ["create", "delete", "get"]},
    ]}


class handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    cluster = None  # set by main

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        # TLS in this connection's own thread, bounded: done in accept() (a wrapped listening
        # socket) one client that connects and says nothing (a pod killed mid-handshake) stopped
        # the server from taking any other connection, while kept-alive ones went on working.
        raw = self.request
        raw.settimeout(30)
        self.request = self.server.tls.wrap_socket(raw, server_side=True)
        self.request.settimeout(None)
        super().setup()
        # As Go's net/http (the real API server): no Nagle. Without it a reply's headers and body,
        # written apart, waited for the client's delayed ACK, 40-200 ms on a kept-alive connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def finish(self):
        try:
            super().finish()
        finally:
            self.request.close()
    def do_GET(self):
        self.serve("GET")

    def do_POST(self):
        self.serve("POST")

    def do_DELETE(self):
        self.serve("DELETE")

    def do_PUT(self):
        self.serve("PUT")

    def do_PATCH(self):
        self.serve("PATCH")

    def send_json(self, code, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.status_sent = code

    def start_stream(self, content_type="application/json"):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.status_sent = 200

    def chunk(self, data):
        if isinstance(data, str):
            data = data.encode()
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def end_stream(self):
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass

    def serve(self, method):
        c = self.cluster
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.status_sent = 0
        # Logged on arrival (a watch or a followed log is counted while it is open); its code
        # is filled in when it ends (None until then).
        entry = {"time": time.time(), "method": method, "path": url.path, "query": url.query, "code": None}
        if not url.path.startswith("/double/"):
            with c.s.lock:
                c.requests.append(entry)
        try:
            self.route(method, url.path, q, raw)
        except api_error as e:
            self.send_json(e.code, e.status(), e.headers)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError):  # the client left
            pass
        except Exception as e:
            log("error serving", method, self.path, traceback.format_exc())
            try:
                self.send_json(500, api_error(500, "InternalError", f"the fault injector failed: {e}").status())
            except OSError:
                pass
        entry["code"] = self.status_sent

    def authenticate(self, path):
        c = self.cluster
        auth = self.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else None
        if path.startswith("/double/"):
            if token != c.admin_token:
                raise api_error(401, "Unauthorized", "Unauthorized")
            return
        if token != c.token:
            raise api_error(401, "Unauthorized", "Unauthorized")

    def route(self, method, path, q, raw):
        c = self.cluster
        if path in ("/healthz", "/livez", "/readyz"):
            body = b"ok"
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(body)
            self.status_sent = 200
            return
        self.authenticate(path)
        if path.startswith("/double/"):
            return self.control(method, path, q, raw)
        ns_of_path = (re.match(r"/api/v1/namespaces/([^/]+)/", path) or [None, None])[1]
        with c.s.lock:
            if c.throttle["count"] > 0 and c.throttle.get("namespace") in (None, ns_of_path):
                c.throttle["count"] -= 1
                ra = c.throttle["retry_after"]
                raise api_error(429, "TooManyRequests", "the server has received too many requests and has asked us to try again later",
                                {"retryAfterSeconds": ra}, {"Retry-After": str(ra)})
        if path == "/version":
            return self.send_json(200, {"major": "1", "minor": "30", "gitVersion": "v1.30.0-fiber-double",
                                        "platform": "linux/amd64"})
        if path == "/api":
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{c.gateway}:{c.port}"}]})
        if path == "/apis":
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        if path == "/api/v1":
            return self.send_json(200, API_RESOURCES)
        mn = re.fullmatch(r"/api/v1/nodes(?:/([^/]+))?", path)
        if mn and method == "GET":
            return self.nodes(mn.group(1))
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/(pods|events|serviceaccounts|secrets)(?:/([^/]+))?(?:/(log))?", path)
        if not m:
            m2 = re.fullmatch(r"/api/v1/(pods|events|serviceaccounts)", path)
            if m2 and method == "GET":
                return self.collection(None, m2.group(1), q)
            raise api_error(404, "NotFound", "the server could not find the requested resource")
        ns, resource, name, sub = m.groups()
        verb = {"GET": "get" if name else ("watch" if q.get("watch") in ("1", "true") else "list"),
                "POST": "create", "DELETE": "delete" if name else "deletecollection"}.get(method, method.lower())
        what = resource + ("/" + sub if sub else "")
        if {(verb, what, ns), (verb, "*", ns), (verb, what, None), (verb, "*", None)} & c.denied:
            raise api_error(403, "Forbidden",
                            f'{resource} is forbidden: User "system:serviceaccount:{ns}:default" cannot {verb} resource '
                            f'"{what}" in API group "" in the namespace "{ns}"',
                            {"kind": resource})
        if sub == "log":
            return self.pod_log(ns, name, q)
        if method == "GET" and name:
            with c.s.lock:
                o = c.s.get(resource, ns, name)
                if not o:
                    raise api_error(404, "NotFound", f'{resource} "{name}" not found', {"name": name, "kind": resource})
                return self.send_json(200, public(o))
        if method == "GET":
            return self.collection(ns, resource, q)
        if method == "POST" and not name:
            try:
                obj = json.loads(raw or b"{}")
            except ValueError as e:
                raise api_error(400, "BadRequest", f"the body of the request was in an unknown format: {e}")
            if q.get("dryRun") == "All":
                if resource == "pods":
                    c.validate_pod(obj)
                return self.send_json(201, obj)
            if resource == "pods":
                return self.send_json(201, public(c.create_pod(ns, obj)))
            if resource == "secrets":
                return self.send_json(201, public(c.create_secret(ns, obj)))
            raise api_error(405, "MethodNotAllowed", f"the server does not allow this method on the requested resource")
        if method == "DELETE" and resource == "secrets" and name:
            return self.send_json(200, public(c.delete_secret(ns, name)))
        if resource == "secrets" and method == "GET" and not name:
            raise api_error(405, "MethodNotAllowed", "this server does not list secrets (fiber never does)")
        if method == "DELETE" and resource == "pods":
            opts = json.loads(raw) if raw else {}
            grace = q.get("gracePeriodSeconds", opts.get("gracePeriodSeconds"))
            grace = int(grace) if grace is not None else None
            uid = (opts.get("preconditions") or {}).get("uid")
            if name:
                return self.send_json(200, public(c.delete_pod(ns, name, grace, uid)))
            reqs = parse_label_selector(q.get("labelSelector"))
            out = []
            with c.s.lock:
                names = [p["metadata"]["name"] for p in c.s.items("pods", ns) if labels_match(reqs, p["metadata"].get("labels"))]
            for n in names:
                try:
                    out.append(public(c.delete_pod(ns, n, grace)))
                except api_error:
                    pass
            return self.send_json(200, {"kind": "PodList", "apiVersion": "v1",
                                        "metadata": {"resourceVersion": str(c.s.rv)}, "items": out})
        raise api_error(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    def nodes(self, name):
        """Nodes as the scheduler sees them: capacity = allocatable (no system reservations)."""
        c = self.cluster
        verb = "get" if name else "list"
        if {(verb, "nodes", None), (verb, "*", None)} & c.denied:
            raise api_error(403, "Forbidden",
                            f'nodes is forbidden: User "system:serviceaccount:default:default" cannot {verb} resource '
                            f'"nodes" in API group "" at the cluster scope', {"kind": "nodes"})
        with c.s.lock:
            items = [c.node_object(n) for n in c.nodes if not name or n["name"] == name]
            rv = str(c.s.rv)
        if name:
            if not items:
                raise api_error(404, "NotFound", f'nodes "{name}" not found', {"name": name, "kind": "nodes"})
            return self.send_json(200, items[0])
        for i in items:
            i.pop("kind", None)
            i.pop("apiVersion", None)
        return self.send_json(200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": rv},
                                    "items": items})

    def collection(self, ns, resource, q):
        c = self.cluster
        labels = parse_label_selector(q.get("labelSelector"))
        allowed = {"pods": ["metadata.name", "metadata.namespace", "status.phase", "spec.nodeName"],
                   "events": ["involvedObject.uid", "involvedObject.name", "involvedObject.kind", "reason", "type",
                              "metadata.name", "metadata.namespace"],
                   "serviceaccounts": ["metadata.name", "metadata.namespace"]}[resource]
        fields = parse_field_selector(q.get("fieldSelector"), allowed)

        def match(o):
            return labels_match(labels, o["metadata"].get("labels")) and fields_match(fields, o)

        if q.get("watch") not in ("1", "true"):
            with c.s.lock:
                items = [public(o) for o in c.s.items(resource, ns) if match(o)]
                rv = str(c.s.rv)
            kind = {"pods": "PodList", "events": "EventList", "serviceaccounts": "ServiceAccountList"}[resource]
            for i in items:
                i.pop("kind", None)
                i.pop("apiVersion", None)
            return self.send_json(200, {"kind": kind, "apiVersion": "v1",
                                        "metadata": {"resourceVersion": rv},
                                        "items": items})
        return self.watch(ns, resource, q, match)

    def watch(self, ns, resource, q, match):
        c = self.cluster
        rv_text = q.get("resourceVersion", "")
        timeout = float(q.get("timeoutSeconds") or 1800)
        bookmarks = q.get("allowWatchBookmarks") in ("1", "true")
        deadline = time.time() + timeout
        kind = {"pods": "Pod", "events": "Event", "serviceaccounts": "ServiceAccount"}[resource]
        with c.s.lock:
            generation = c.s.generation
            if rv_text in ("", "0"):
                initial = [("ADDED", public(o)) for o in c.s.items(resource, ns) if match(o)]
                since = c.s.rv
            else:
                try:
                    since = int(rv_text)
                except ValueError:
                    raise api_error(400, "BadRequest", f'invalid resource version "{rv_text}"')
                initial = []
                if since < c.s.oldest:
                    initial = None
        self.start_stream()
        if initial is None:
            gone = api_error(410, "Expired", f"too old resource version: {since} ({c.s.oldest + 1})")
            self.chunk(json.dumps({"type": "ERROR", "object": gone.status()}) + "\n")
            return self.end_stream()
        for typ, o in initial:
            self.chunk(json.dumps({"type": typ, "object": o}) + "\n")
        last_bookmark = time.time()
        sent_rv = since
        while True:
            out = []
            with c.s.lock:
                if c.s.generation != generation:
                    break
                if since < c.s.oldest:
                    gone = api_error(410, "Expired", f"too old resource version: {since} ({c.s.oldest + 1})")
                    out.append({"type": "ERROR", "object": gone.status()})
                else:
                    for rv, res, typ, o in c.s.since(since):
                        if res == resource and (ns is None or o["metadata"].get("namespace") == ns) and match(o):
                            out.append({"type": typ, "object": public(o)})
                    since = c.s.rv
                if not out:
                    remaining = min(deadline - time.time(), c.args.bookmark_seconds)
                    if remaining > 0:
                        c.s.lock.wait(remaining)
                current = c.s.rv
            for ev in out:
                self.chunk(json.dumps(ev) + "\n")
                if ev["type"] == "ERROR":
                    return self.end_stream()
            if out:
                sent_rv = since
            if time.time() >= deadline:
                break
            if bookmarks and time.time() - last_bookmark >= c.args.bookmark_seconds and current > sent_rv:
                with c.s.lock:
                    # Only events up to `since` were sent: a bookmark must not skip the rest.
                    mark = since
                self.chunk(json.dumps({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": "v1",
                                                                      "metadata": {"resourceVersion": str(mark)}}}) + "\n")
                last_bookmark = time.time()
                sent_rv = mark
        self.end_stream()

    def pod_log(self, ns, name, q):
        c = self.cluster
        with c.s.lock:
            p = c.s.get("pods", ns, name)
            if not p:
                raise api_error(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"})
            cid = p.get("_container")
            container = p["spec"]["containers"][0]["name"]
        want = q.get("container")
        if want and want != container:
            raise api_error(400, "BadRequest", f"container {want} is not valid for pod {name}")
        if not cid:
            raise api_error(400, "BadRequest", f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating')
        follow = q.get("follow") in ("1", "true")
        tail = q.get("tailLines")
        path = f"/containers/{cid}/logs?stdout=1&stderr=1" + (f"&tail={int(tail)}" if tail else "")
        if not follow:
            status, body = c.engine.call("GET", path, raw=True)
            text, _ = demux(body)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            self.status_sent = 200
            return
        self.start_stream("text/plain")
        rest = b""
        for b in c.engine.stream(path + "&follow=1"):
            text, rest = demux(rest + b)
            self.chunk(text)
        self.end_stream()

    def control(self, method, path, q, raw):
        c = self.cluster
        with c.s.lock:
            if path == "/double/deny":
                if method == "DELETE" and "verb" in q:
                    c.denied.discard((q["verb"], q.get("resource", "*"), q.get("namespace")))
                elif method == "DELETE":
                    c.denied.clear()
                else:
                    c.denied.add((q["verb"], q.get("resource", "*"), q.get("namespace")))
            elif path == "/double/throttle":
                c.throttle = {"count": int(q.get("count", 1)), "retry_after": int(q.get("retry_after", 1)),
                              "namespace": q.get("namespace")}
            elif path == "/double/node":
                # A node's room changes (a GPU node joins, a node is cordoned), as an autoscaler or an
                # admin would do it.
                n = next((n for n in c.nodes if n["name"] == q["name"]), None)
                if not n:
                    raise api_error(404, "NotFound", f'nodes "{q["name"]}" not found')
                for k in ("cpu", "gpu"):
                    if k in q:
                        n[k] = float(q[k]) if k == "cpu" else int(q[k])
                if "cordoned" in q:
                    n["cordoned"] = q["cordoned"] in ("1", "true")

            elif path == "/double/silence":
                if method == "DELETE":
                    c.silenced.discard(q["namespace"])
                else:
                    c.silenced.add(q["namespace"])
                c.s.lock.notify_all()
            elif path == "/double/compact":
                c.s.compact()
            elif path == "/double/requests":
                return self.send_json(200, {"requests": c.requests})
            elif path == "/double/rotate":
                pass
            else:
                raise api_error(404, "NotFound", "no such control")
        if path == "/double/rotate":
            c.rotate()
        self.send_json(200, {"ok": True})


class server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    tls = None  # the SSLContext; connections are wrapped by handler.setup

    def handle_error(self, request, client_address):
        e = sys.exc_info()[1]
        if isinstance(e, (ssl.SSLError, OSError)):  # a client that left or never finished its handshake
            log("connection from", client_address, "dropped:", e)
        else:
            super().handle_error(request, client_address)
    request_queue_size = 128  # the default 5 refuses connections when many masters start at once
    allow_reuse_address = True


def make_ca(state_dir, ips):
    """A CA and a server certificate for `ips` (openssl)."""
    key, crt = os.path.join(state_dir, "server.key"), os.path.join(state_dir, "server.crt")
    ca_key, ca_crt = os.path.join(state_dir, "ca.key"), os.path.join(state_dir, "ca.crt")
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca_crt, "-days", "30",
        "-subj", "/CN=fiber-kube-double-ca")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", key + ".csr", "-subj",
        "/CN=kube-apiserver")
    ext = os.path.join(state_dir, "san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,DNS:kubernetes.default.svc," + ",".join(f"IP:{i}" for i in ips) + "\n")
    run("openssl", "x509", "-req", "-in", key + ".csr", "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-out", crt,
        "-days", "30", "-extfile", ext)
    return crt, key, ca_crt


def ensure_network(engine, name, subnet):
    st, _ = engine.call("GET", f"/networks/{name}")
    if st == 200:
        return False
    st, out = engine.call("POST", "/networks/create", {"Name": name, "Driver": "bridge", "IPAM": {
        "Config": [{"Subnet": subnet, "Gateway": str(next(ipaddress.ip_network(subnet).hosts()))}]},
        "Options": {"com.docker.network.bridge.name": name[:15]}})
    if st != 201:
        raise SystemExit(f"cannot create the Docker network {name}: {out}")
    # Once dockerd runs, FORWARD drops traffic between containers of other bridges.
    subprocess.run(["iptables", "-I", "FORWARD", "-i", name[:15], "-o", name[:15], "-j", "ACCEPT"], capture_output=True)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--state", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--network", default="kube-double")
    ap.add_argument("--subnet", default="10.78.0.0/24")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--node-cpus", type=float, default=64)
    ap.add_argument("--node-memory-mi", type=int, default=65536)
    ap.add_argument("--gpu-resource", default="nvidia.com/gpu")
    ap.add_argument("--bookmark-seconds", type=float, default=5)
    args = ap.parse_args()
    state_dir = os.path.abspath(args.state)
    os.makedirs(state_dir, exist_ok=True)
    c = cluster(args, state_dir)
    made_network = ensure_network(c.engine, args.network, args.subnet)
    crt, key, ca = make_ca(state_dir, ["127.0.0.1", c.gateway])
    srv = server(("0.0.0.0", args.port), handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv.tls = ctx
    c.port = srv.server_address[1]
    handler.cluster = c
    with open(ca) as f:
        ca_pem = f.read()
    import shutil
    shutil.copy(ca, os.path.join(c.sa_dir, "ca.crt"))
    with open(os.path.join(c.sa_dir, "namespace"), "w") as f:
        f.write("default")
    url = f"https://127.0.0.1:{c.port}"
    import base64
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "double",
        "clusters": [{"name": "double", "cluster": {"server": url, "certificate-authority-data":
                                                    base64.b64encode(ca_pem.encode()).decode()}}],
        "users": [{"name": "tester", "user": {"tokenFile": os.path.join(state_dir, "token")}}],
        "contexts": [{"name": "double", "context": {"cluster": "double", "user": "tester", "namespace": "default"}}]}
    with open(os.path.join(state_dir, "kubeconfig"), "w") as f:
        json.dump(kubeconfig, f, indent=1)  # JSON is YAML
    for fname, text in (("admin-token", c.admin_token), ("url", url), ("gateway", c.gateway),
                        ("pod-url", f"https://{c.gateway}:{c.port}")):
        with open(os.path.join(state_dir, fname), "w") as f:
            f.write(text)
    threading.Thread(target=c.gc_loop, daemon=True).start()

    def stop(*_):
        log("stopping: removing the fault injector's containers")
        c.shutdown()
        if made_network:
            c.engine.call("DELETE", f"/networks/{args.network}")
            subprocess.run(["iptables", "-D", "FORWARD", "-i", args.network[:15], "-o", args.network[:15], "-j", "ACCEPT"],
                           capture_output=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with open(os.path.join(state_dir, "ready"), "w") as f:
        f.write(str(os.getpid()))
    log(f"kubernetes fault injector on {url} (pods on Docker network {args.network}, gateway {c.gateway})")
    srv.serve_forever()


if __name__ == "__main__":
    main()
