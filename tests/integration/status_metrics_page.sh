# `nightshift status --prometheus` and `--html`, and the daemon's HTTP service
# serving them at /metrics and / (issue 33), during a running batch whose name
# is hostile HTML: both routes need the bearer key (401 without it); the
# metrics (the CLI's and the server's) parse with our strict reader of the
# text format (tests/support/prometheus_text.py) and with Python's
# prometheus_client where installed, and their values are the database's; the
# page has the batch's progress element with its name escaped, the throughput
# chart, the daemon and the failure's reason; a headless Chromium screenshot of
# it is produced where Debian's chromium is installed (kept as a test artifact).
# With STATUS_BACKEND=postgres (status_metrics_postgres.sh) the queue is a
# throwaway PostgreSQL server's, where the queue reads are SQL of their own.
source "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || { echo "SKIP: python3 is needed to check the output"; exit 77; }
STATUS_BACKEND=${STATUS_BACKEND:-sqlite}
if [[ "$STATUS_BACKEND" == postgres ]]; then
  start_pg_server || {
    echo "SKIP: $PG_SKIP"
    exit 77
  }
fi
q() {  # one query against the queue, '|' separated
  if [[ "$STATUS_BACKEND" == postgres ]]; then pgq "$1"; else sql "$1"; fi
}

# One job at a time; the long line (8000 tokens) runs far longer than the checks, and is stopped after them.
make_model slow.gguf --n-embd 512 --n-layer 6 --n-ff 1024 --n-ctx 8192
write_config slow=slow.gguf
{ echo "max_batch: 1"; echo "lease_ms: 3000"; } >> "$CONFIG"
# The daemon's HTTP service serves the same page and metrics at / and /metrics, behind a bearer key.
KEY=ns-test-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
printf '%s\n' "$KEY" > "$WORK/keys"
printf 'http:\n  listen: 127.0.0.1:0\n  keys_file: keys\n' >> "$CONFIG"
if [[ "$STATUS_BACKEND" == postgres ]]; then
  { grep -v '^database:' "$CONFIG"; echo "database: '$PG_URL'"; } > "$WORK/pg.yaml"
  mv "$WORK/pg.yaml" "$CONFIG"
fi

BATCH='night<script>alert("x")</script>&amp;'
# Three short lines, a chat line the base model cannot run (it fails: no chat template), the long line, one more.
python3 - "$WORK/night.jsonl" <<'PY'
import json, sys
def line(custom_id, body, url="/v1/completions"):
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body}) + "\n"
with open(sys.argv[1], "w") as f:
    for i in (1, 2, 3):
        f.write(line(f"s{i}", {"prompt": f"Short {i}", "max_tokens": 3, "ignore_eos": True}))
    f.write(line("chat", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}, "/v1/chat/completions"))
    f.write(line("long", {"prompt": "Once upon a time", "max_tokens": 8000, "ignore_eos": True}))
    f.write(line("after", {"prompt": "After", "max_tokens": 3}))
PY
ns submit --config "$CONFIG" --model slow --any-model --jsonl "$WORK/night.jsonl" --batch "$BATCH" > /dev/null
long=$(q "SELECT id FROM jobs WHERE custom_id = 'long'")

start_daemon
listening() {
  kill -0 "$DAEMON_PID" 2> /dev/null || fail "nightshiftd exited: $(tail -5 "$WORK/daemon.log")"
  grep -q "listens on 127.0.0.1:" "$WORK/daemon.log"
}
wait_for 30 "the HTTP service to listen" listening
PORT=$(grep -o "listens on 127.0.0.1:[0-9]*" "$WORK/daemon.log" | head -1 | cut -d: -f2)
long_running() {
  [[ "$(q "SELECT count(*) FROM jobs WHERE id = $long AND state = 'running' AND progress_generated > 0")" == 1 ]]
}
wait_for 60 "the long line to run" long_running

ns status --config "$CONFIG" --prometheus > "$WORK/metrics.txt"
ns status --config "$CONFIG" --html > "$WORK/page.html"
# Over HTTP: 401 without the key or with a wrong one; with it, the content types and the same renderings.
python3 - "$PORT" "$KEY" "$WORK" "$BATCH" <<'PY' || fail "GET / and /metrics over HTTP"
import sys, urllib.error, urllib.parse, urllib.request
port, key, work, batch = sys.argv[1:5]
def get(path, key=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()
for path in ("/", "/metrics"):
    for k in (None, "ns-test-not-the-key-0123456789"):
        status, _, body = get(path, k)
        assert status == 401 and b"invalid_api_key" in body and b"nightshift_" not in body, (path, k, status, body)
status, ctype, body = get("/metrics", key)
assert (status, ctype) == (200, "text/plain; version=0.0.4; charset=utf-8"), (status, ctype, body[:200])
open(f"{work}/metrics_http.txt", "wb").write(body)
status, ctype, body = get("/", key)
assert (status, ctype) == (200, "text/html; charset=utf-8"), (status, ctype, body[:200])
open(f"{work}/page_http.html", "wb").write(body)
assert b'http-equiv="refresh" content="10"' in body
status, _, body = get("/?refresh=0", key)
assert status == 200 and b"http-equiv" not in body, status
status, _, body = get("/?refresh=soon", key)
assert status == 400 and b"refresh must be" in body, (status, body)
status, _, body = get("/?batch=" + urllib.parse.quote(batch), key)
assert status == 200 and body.count(b'class="batch-progress"') == 1, (status, body[:300])
status, _, body = get("/?batch=no-such-batch", key)
assert status == 404 and b"no batch named" in body, (status, body)
status, _, body = get("/metrics/extra", key)
assert status == 404 and b"/metrics" in body, (status, body)
print("http ok")
PY
q "SELECT state, count(*) FROM jobs GROUP BY state" > "$WORK/states.txt"
q "SELECT count(*), sum(r.completion_tokens), sum(r.prompt_tokens), sum(r.bytes_read), sum(r.queue_wait_ms),
            sum(r.io_wait_ms), sum(r.compute_ms), sum(r.cache_hit_rate * r.completion_tokens),
            sum(r.decode_share_ms), sum(r.avg_batch_size * r.completion_tokens) FROM results r" > "$WORK/sums.txt"
worker=$(q "SELECT id FROM workers")
# The checks below compare the renderings with the database as read now: the long line must still be running.
long_running || fail "the long line ended before the checks (make it longer)"

# check_metrics.py PARSER METRICS STATES SUMS WORKER: the metrics parse and are the database's. PARSER: "own"
# (tests/support/prometheus_text.py, strict, always) or "prometheus_client" (Python's, where installed).
cat > "$WORK/check_metrics.py" <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.environ["NS_SOURCE_DIR"], "tests", "support"))
parser = sys.argv[1]
text = open(sys.argv[2], encoding="utf-8").read()
if parser == "own":
    import prometheus_text
    families = prometheus_text.parse(text)
    samples = lambda f: families[f].samples
    type_of = lambda f: families[f].type
    family_of = lambda f: f                  # 0.0.4: a counter family is named with its _total
else:
    from prometheus_client.parser import text_string_to_metric_families
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = lambda f: [(s.name, s.labels, s.value) for s in families[f].samples]
    type_of = lambda f: families[f].type
    family_of = lambda f: f[:-len("_total")] if f.endswith("_total") else f  # it drops _total from the family
def value(family, sample=None, **labels):
    for name, got, v in samples(family_of(family)):
        if (sample is None or name == sample) and all(got.get(k) == x for k, x in labels.items()):
            return v
    raise AssertionError(f"no sample {family} {labels}")
states = dict(l.split("|") for l in open(sys.argv[3]).read().split())
for state in ("queued", "running", "done", "failed", "cancelled", "dead"):
    assert value("nightshift_jobs", model="slow", state=state) == int(states.get(state, 0)), state
assert int(states["running"]) == 1 and int(states["done"]) == 3 and int(states["failed"]) == 1, states
sums = open(sys.argv[4]).read().strip().split("|")
n, ctok, ptok, rbytes, qwait, iow, comp, hitx, share, batchx = (float(x) for x in sums)
t = "nightshift_tokens_generated_total"
assert value(t, t, model="slow") == ctok == 9, ctok
assert value("nightshift_prompt_tokens_total", "nightshift_prompt_tokens_total", model="slow") == ptok
assert value("nightshift_results_total", "nightshift_results_total", model="slow") == n == 3
assert value("nightshift_read_bytes_total", "nightshift_read_bytes_total", model="slow") == rbytes  # 0: dense
close = lambda a, b: abs(a - b) <= 1e-9 * max(1.0, abs(b))
assert close(value("nightshift_queue_wait_seconds", "nightshift_queue_wait_seconds_sum", model="slow"), qwait / 1000)
assert value("nightshift_queue_wait_seconds", "nightshift_queue_wait_seconds_count", model="slow") == n
assert close(value("nightshift_io_wait_ratio", model="slow"), iow / (iow + comp))
assert close(value("nightshift_read_bytes_per_second", model="slow"), rbytes / ((iow + comp) / 1000))
assert close(value("nightshift_expert_cache_hit_ratio", model="slow"), hitx / ctok)
assert close(value("nightshift_batch_size_mean", model="slow"), batchx / ctok)
assert close(value("nightshift_decode_tokens_per_second", model="slow"), ctok / (share / 1000))
worker = sys.argv[5]
assert value("nightshift_worker_up", worker=worker) == 1
assert value("nightshift_batch_size", worker=worker) == 1
assert value("nightshift_tokens_per_second", worker=worker) > 0
assert value("nightshift_worker_heartbeat_timestamp_seconds", worker=worker) > 1.7e9
for name, type_ in (("nightshift_jobs", "gauge"), ("nightshift_queue_wait_seconds", "summary"),
                    ("nightshift_tokens_per_second", "gauge"), ("nightshift_read_bytes_total", "counter"),
                    ("nightshift_tokens_generated_total", "counter"), ("nightshift_io_wait_ratio", "gauge"),
                    ("nightshift_expert_cache_hit_ratio", "gauge"), ("nightshift_batch_size", "gauge")):
    assert type_of(family_of(name)) == type_, (name, type_of(family_of(name)))
if parser == "own":
    for f in families.values():
        assert f.name.startswith("nightshift_") and f.help and f.type, (f.name, f.help, f.type)
print("metrics ok:", parser)
PY
for m in metrics metrics_http; do
  python3 "$WORK/check_metrics.py" own "$WORK/$m.txt" "$WORK/states.txt" "$WORK/sums.txt" "$worker" ||
    fail "$m.txt (read by tests/support/prometheus_text.py) is not the database's"
done
# Debian's python3-prometheus-client is for Debian's python3, which may not be the first on the PATH.
PROM_PY=
for py in python3 /usr/bin/python3; do
  if "$py" -c 'import prometheus_client' 2> /dev/null; then PROM_PY=$py; break; fi
done
if [[ -n "$PROM_PY" ]]; then
  for m in metrics metrics_http; do
    "$PROM_PY" "$WORK/check_metrics.py" prometheus_client "$WORK/$m.txt" "$WORK/states.txt" "$WORK/sums.txt" \
      "$worker" || fail "$m.txt (read by prometheus_client) is not the database's"
  done
else
  echo "NOTE: python3-prometheus-client is not installed (scripts/install-deps.sh): only our own parser read them"
fi

# Label values are escaped: a model name with a quote, a backslash and a newline (queued, never run).
printf '{"custom_id": "odd", "method": "POST", "url": "/v1/completions", %s}\n' \
  '"body": {"model": "we\"ird\\name\nline2", "prompt": "x", "max_tokens": 1}' > "$WORK/odd.jsonl"
ns submit --config "$CONFIG" --any-model --jsonl "$WORK/odd.jsonl" > /dev/null
ns status --config "$CONFIG" --prometheus > "$WORK/odd.txt"
expect_contains "$(cat "$WORK/odd.txt")" 'nightshift_jobs{model="we\"ird\\name\nline2",state="queued"} 1' \
  "an escaped label value"
python3 - "$WORK/odd.txt" <<'PY' || fail "the escaped label value does not read back"
import os, sys
sys.path.insert(0, os.path.join(os.environ["NS_SOURCE_DIR"], "tests", "support"))
import prometheus_text
jobs = prometheus_text.parse(open(sys.argv[1], encoding="utf-8").read())["nightshift_jobs"].samples
assert ("nightshift_jobs", {"model": 'we"ird\\name\nline2', "state": "queued"}, 1.0) in jobs, jobs
PY

cat > "$WORK/check_page.py" <<'PY'
import sys
from html.parser import HTMLParser
page, batch, long_id, worker = open(sys.argv[1], encoding="utf-8").read(), sys.argv[2], sys.argv[3], sys.argv[4]
assert "<script" not in page.lower(), "a script (or the batch name unescaped) in the page"
assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in page, \
    "the page refers to something elsewhere"
class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.progress, self.svg, self.bars, self.rows, self.text = [], [], 0, 0, {}, []
        self.refresh = None
        self.table = None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag not in ("meta", "br", "line", "rect", "img"):
            self.stack.append(tag)
        if tag == "meta" and a.get("http-equiv") == "refresh":
            self.refresh = a["content"]
        if tag == "progress" and "batch-progress" in a.get("class", "").split():
            self.progress.append(a)
        if tag == "svg" and a.get("id") == "throughput-chart":
            self.svg += 1
        if tag == "rect" and a.get("class") == "bar":
            self.bars += 1
        if tag == "table":
            self.table = a.get("id")
            self.rows[self.table] = []
        if tag == "tr" and self.table:
            self.rows[self.table].append(a)
    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in ("meta", "br", "line", "rect", "img"):
            self.stack.pop()
    def handle_endtag(self, tag):
        if tag in ("line", "rect"):
            return
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
        self.stack.pop()
    def handle_data(self, data):
        self.text.append(data)
p = Page()
p.feed(page)
p.close()
assert p.stack == [], p.stack
assert p.refresh == "10", p.refresh
text = "".join(p.text)
assert len(p.progress) == 1, p.progress
bar = p.progress[0]
assert bar["data-batch"] == batch, bar            # the parser unescapes: the name as submitted
assert bar["data-finished"] == "4" and bar["data-total"] == "6", bar
assert bar["value"] == "4" and bar["max"] == "6", bar
assert batch in text, "the batch's name is not shown as text"
assert p.svg == 1 and p.bars >= 1, (p.svg, p.bars)
assert any(r.get("data-job") == long_id for r in p.rows.get("running", [])), p.rows.get("running")
assert any(r.get("data-worker") == worker for r in p.rows.get("daemons", [])), p.rows.get("daemons")
failures = [r for r in p.rows.get("failures", []) if r.get("class") == "failure"]
assert len(failures) == 1, failures
assert "no chat template" in text, "the failure's reason"
print("page ok")
PY
for page in page page_http; do
  python3 "$WORK/check_page.py" "$WORK/$page.html" "$BATCH" "$long" "$worker" || fail "$page.html"
done

# A real browser renders it: a screenshot where Debian's chromium is installed.
if [[ "$STATUS_BACKEND" == postgres ]]; then
  :  # the same page as SQLite's: one screenshot is enough
elif command -v chromium > /dev/null; then
  timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,900 \
    --screenshot="$WORK/status_page.png" "file://$WORK/page.html" > "$WORK/chromium.log" 2>&1 ||
    fail "chromium could not render the page: $(tail -5 "$WORK/chromium.log")"
  python3 - "$WORK/status_page.png" <<'PY' || fail "the screenshot"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
width, height = struct.unpack(">II", data[16:24])
assert (width, height) == (1200, 900), (width, height)
# Decode the image: a rendered page has many distinct colours (text, bars, the chart), a blank one has one.
pos, idat = 8, b""
bit_depth, colour = data[24], data[25]
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    if kind == b"IDAT":
        idat += data[pos + 8:pos + 8 + n]
    pos += 12 + n
raw = zlib.decompress(idat)
channels = {2: 3, 6: 4}[colour]
stride = width * channels + 1
rows = [raw[y * stride + 1:(y + 1) * stride] for y in range(height)]
# Filtered bytes differ from pixels, but a blank page compresses to almost nothing and has ~1 distinct row.
distinct = len(set(rows))
assert bit_depth == 8 and distinct > 50, ("too plain a screenshot", distinct)
print("screenshot ok", len(data), "bytes,", distinct, "distinct rows")
PY
  mkdir -p "$NS_BINARY_DIR/test-artifacts"
  cp "$WORK/status_page.png" "$WORK/page.html" "$NS_BINARY_DIR/test-artifacts/"
else
  echo "NOTE: chromium is not installed: no screenshot of the status page (apt install chromium)"
fi

kill -TERM "$DAEMON_PID"  # stops at the next token (the long line, if it still runs, is checkpointed)
wait_daemon 0
echo "ok"
