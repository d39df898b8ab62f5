import http.client, json, socket, statistics, sys, time
class unix_conn(http.client.HTTPConnection):
    def __init__(self): super().__init__("localhost")
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect("/var/run/docker.sock")
def call(method, path, body=None):
    c = unix_conn(); c.request(method, "/v1.41" + path, body=json.dumps(body) if body else None,
                              headers={"Content-Type": "application/json"})
    r = c.getresponse(); data = r.read(); c.close(); return json.loads(data) if data else None
times = []
for _ in range(20):
    t = time.perf_counter()
    cid = call("POST", "/containers/create", {"Image": "fiber-test-root:latest", "Cmd": ["/bin/true"],
               "HostConfig": {"Binds": ["/usr:/usr:ro"], "Init": True, "NetworkMode": "host"}})["Id"]
    call("POST", f"/containers/{cid}/start"); call("POST", f"/containers/{cid}/wait")
    call("DELETE", f"/containers/{cid}?force=1")
    times.append((time.perf_counter() - t) * 1e3)
print(f"engine floor: create+start+wait+remove of /bin/true median={statistics.median(times):.1f}ms")

# Four at once, as a Pool(4) starts its workers: create and start four containers in parallel,
# until the engine says all four run.
import threading
def one(out):
    cid = call("POST", "/containers/create", {"Image": "fiber-test-root:latest", "Cmd": ["/bin/sleep", "5"],
               "HostConfig": {"Binds": ["/usr:/usr:ro"], "Init": True, "NetworkMode": "host"}})["Id"]
    call("POST", f"/containers/{cid}/start")
    out.append(cid)
times = []
for _ in range(5):
    t = time.perf_counter()
    ids = []
    threads = [threading.Thread(target=one, args=(ids,)) for _ in range(4)]
    for th in threads: th.start()
    for th in threads: th.join()
    times.append((time.perf_counter() - t) * 1e3)
    for cid in ids: call("DELETE", f"/containers/{cid}?force=1")
print(f"engine floor x4: four containers created and started in parallel median={statistics.median(times):.1f}ms")
