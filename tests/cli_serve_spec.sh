#!/usr/bin/env bash
# infer serve --spec-ngram and --model-draft: each slot's answers are the ones a server without
# them gives (greedy, and sampled with a seed), four requests at once, texts
# that repeat their prompt and one that does not; /metrics counts the draft
# tokens checked and kept; SIGTERM still stops it cleanly.
# usage: cli_serve_spec.sh INFER_BIN FIXTURES_DIR
infer=$1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/serve/start.sh"
ask() { # base, out file: the answers of the requests, sent four at a time
    python3 - "$1" "$2" "$root/bench/data/spec-edit.txt" <<'PY'
import json, os, sys, urllib.request
from concurrent.futures import ThreadPoolExecutor
base, out, code = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
light = os.environ.get("INFER_TEST_LIGHT") == "1"  # (a sanitizer build: shorter answers, more time)
reqs = [
    {"messages": [{"role": "user", "content": code}], "max_tokens": 96, "temperature": 0},
    {"messages": [{"role": "user", "content": "Repeat exactly: one two three four five six seven eight nine ten, one two three four five six seven eight nine ten."}], "max_tokens": 64, "temperature": 0},
    {"messages": [{"role": "user", "content": "Write a short poem about the sea."}], "max_tokens": 48, "temperature": 0},
    {"messages": [{"role": "user", "content": code}], "max_tokens": 64, "temperature": 0.8, "seed": 11},
    {"prompt": "a b c d e f g a b c d e f g a b c", "max_tokens": 40, "temperature": 0},
]
def one(r):
    if light:
        r = dict(r, max_tokens=r["max_tokens"] // 3)
    path = "/v1/chat/completions" if "messages" in r else "/v1/completions"
    q = urllib.request.Request(base + path, json.dumps(r).encode(), {"Content-Type": "application/json"})
    j = json.load(urllib.request.urlopen(q, timeout=900 if light else 120))
    c = j["choices"][0]
    return [c["message"]["content"] if "message" in c else c["text"], c["finish_reason"], j["usage"]["completion_tokens"]]
with ThreadPoolExecutor(4) as ex:
    res = list(ex.map(one, reqs))
json.dump(res, open(out, "w"))
PY
}
rc=0
start_server --parallel 4 -c 1024 -t 2
ask "$base" "$tmp/want.json" || { echo "FAILED: requests to the server without --spec-ngram"; rc=1; }
stop_server 30
same() { # label: the answers in got.json are want.json's; /metrics counts the drafts
    python3 - "$tmp/want.json" "$tmp/got.json" "$base" "$1" <<'PY'
import json, sys, urllib.request
want, got, label = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[4]
bad = [i for i in range(len(want)) if want[i] != got[i]]
for i in bad:
    print(f"FAILED: request {i}: with {label} {got[i]!r}, without {want[i]!r}")
m = urllib.request.urlopen(sys.argv[3] + "/metrics").read().decode()
val = {l.split()[0]: float(l.split()[1]) for l in m.splitlines() if l and not l.startswith("#")}
d, a = val.get("infer_spec_drafted_total", -1), val.get("infer_spec_accepted_total", -1)
if not (d > 0 and 0 < a <= d):
    print(f"FAILED: /metrics: infer_spec_drafted_total {d}, infer_spec_accepted_total {a}"); bad.append(-1)
print(f"cli_serve_spec: {len(want)} answers the same with and without {label}; {int(a)} of {int(d)} draft tokens kept")
sys.exit(1 if bad else 0)
PY
}
# the n-gram drafter, then a draft model (the model itself: its guesses are kept while greedy)
for flags in "--spec-ngram 6" "--model-draft $model --draft-max 6"; do
    rm -f "$tmp/out" # (so that the new server's address is read, not the old one's)
    start_server --parallel 4 -c 1024 -t 2 $flags
    ask "$base" "$tmp/got.json" || { echo "FAILED: requests to the server with $flags"; rc=1; }
    same "${flags%% [0-9a-z/]*}" || rc=1
    stop_server 30
    sanitizer_clean "$tmp/err"
done
exit $rc
