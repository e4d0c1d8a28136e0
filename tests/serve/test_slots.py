"""infer serve's slots on disk (llama-server's GET /slots, POST
/slots/ID?action=save|restore|erase under --slot-save-path). One phase a
server (tests/cli_serve_slots.sh starts each):
  save DIR     -- a long system prompt's answers at temperature 0 (the state
                  file keeps them), its slot saved; hostile requests
  restore DIR  -- on a fresh server: the slot restored, the same system
                  prompt with another question reuses its cache (cached_tokens)
                  and answers as the first server did; erase, restore again
  noflag       -- a server without --slot-save-path refuses save and restore
  chunks       -- a server under INFER_SERVE_REUSE=chunks (a GPU's way): a prompt
                  reuses only whole 256-token chunks made from position 0, and
                  answers as without
  share DIR    -- a fresh server of two slots: while one answers a long request
                  after the system prompt, a question after the same system
                  prompt goes to the other and copies the prefix from the busy
                  slot's cache (cached_tokens, /metrics), answering as alone
usage: test_slots.py BASE_URL PHASE [DIR]"""
import http.client
import json
import os
import sys
import threading
import urllib.parse

from checks import check, report

base, phase = sys.argv[1], sys.argv[2]
slot_dir = sys.argv[3] if len(sys.argv) > 3 else None
url = urllib.parse.urlparse(base)
state = os.path.join(slot_dir, "answers.json") if slot_dir else None

LIGHT = os.environ.get("INFER_TEST_LIGHT") == "1"  # (a sanitizer build: a shorter system prompt and long request)
SYSTEM = ("You are a librarian who answers questions about the history of printing. " +
          " ".join(f"Fact {i}: the press in city number {i} printed {i * 7} books in its first year, on paper made from rags."
                   for i in range(12 if LIGHT else 40)))
Q1 = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Which city printed the most books?"}]
Q2 = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What was the paper made from?"}]


def request(method, path, body=None, raw=None):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=300)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    c.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode(errors="replace")
    c.close()
    try:
        return r.status, json.loads(text)
    except ValueError:
        return r.status, text


def chat(msgs):
    st, r = request("POST", "/v1/chat/completions", {"model": "any", "messages": msgs, "temperature": 0, "max_tokens": 24})
    check(st == 200, f"chat: {st} {r}")
    if st != 200:
        return "", 0, 0
    u = r["usage"]
    return r["choices"][0]["message"]["content"], u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"]


def slots():
    st, r = request("GET", "/slots")
    check(st == 200 and isinstance(r, list) and all({"id", "n_ctx", "is_processing", "n_cached"} <= set(s) for s in r), f"GET /slots: {st} {r}")
    return r if st == 200 else []


def action(slot, act, body=None):
    return request("POST", f"/slots/{slot}?action={act}", body)


def refused(st, r, status, words, what):
    msg = r.get("error", {}).get("message", "") if isinstance(r, dict) else ""
    check(st == status and all(w in msg for w in words), f"{what}: {st} {r} (want {status} saying {words})")


if phase == "save":
    check(all(s["n_cached"] == 0 for s in slots()), "a fresh server's slots hold nothing")
    b0, n2, c2 = chat(Q2)  # (first: no cache to reuse)
    check(c2 == 0, f"the first request found {c2} cached tokens")
    a0, n1, _ = chat(Q1)
    s = max(slots(), key=lambda s: s["n_cached"])
    check(s["n_cached"] >= n1 and not s["is_processing"], f"the slot of the last request: {s}, its prompt {n1} tokens")
    st, r = action(s["id"], "save", {"filename": "sys.bin"})
    check(st == 200 and r.get("id_slot") == s["id"] and r.get("filename") == "sys.bin" and r.get("n_saved") == s["n_cached"] and
          r.get("n_written") == os.path.getsize(os.path.join(slot_dir, "sys.bin")) and r.get("timings", {}).get("save_ms", -1) >= 0,
          f"save: {st} {r}")
    check(not [f for f in os.listdir(slot_dir) if f.endswith(".tmp")], f"a temporary file is left: {os.listdir(slot_dir)}")
    with open(state, "w") as f:
        json.dump({"a0": a0, "b0": b0, "n_saved": r.get("n_saved"), "slot": s["id"]}, f)

    # hostile: names, ids, actions, methods, files
    for name in ["../sys.bin", "a/b", "", ".hidden", "x" * 300, "a\nb", 7, None]:
        st, r = action(0, "save", {"filename": name})
        refused(st, r, 400, ["filename"], f"save as {name!r}")
    st, r = action(0, "save", {})
    refused(st, r, 400, ["filename"], "save without a filename")
    st, r = request("POST", "/slots/0?action=save", raw=b"{not json")
    refused(st, r, 400, ["JSON"], "save with a body that is not JSON")
    for sid in ["9", "-1", "abc", "", "0x1", "00000000000000000001"]:
        st, r = action(sid, "erase")
        refused(st, r, 400, ["slot", "0 to 1"], f"slot {sid!r}")
    st, r = action(0, "compress")
    refused(st, r, 400, ["action"], "action compress")
    st, r = request("POST", "/slots/0")
    refused(st, r, 400, ["action"], "no action")
    st, r = request("GET", "/slots/0?action=save")
    refused(st, r, 405, ["POST"], "GET /slots/0")
    st, r = request("POST", "/slots")
    refused(st, r, 405, ["GET"], "POST /slots")
    st, r = action(0, "restore", {"filename": "none.bin"})
    refused(st, r, 400, ["none.bin"], "restoring a missing file")
    with open(os.path.join(slot_dir, "sys.bin"), "rb") as f:
        whole = f.read()
    with open(os.path.join(slot_dir, "cut.bin"), "wb") as f:
        f.write(whole[: len(whole) // 2])
    st, r = action(0, "restore", {"filename": "cut.bin"})
    refused(st, r, 400, ["cut short"], "restoring a file cut short")
    bad = bytearray(whole)
    bad[len(bad) // 2] ^= 0x10
    with open(os.path.join(slot_dir, "bad.bin"), "wb") as f:
        f.write(bad)
    st, r = action(0, "restore", {"filename": "bad.bin"})
    refused(st, r, 400, ["checksum"], "restoring a changed file")
    with open(os.path.join(slot_dir, "junk.bin"), "wb") as f:
        f.write(b"GGUF" + b"\0" * 100)
    st, r = action(0, "restore", {"filename": "junk.bin"})
    refused(st, r, 400, ["not a context state"], "restoring a file of another kind")
    # a slot that a request holds: 409, and the request goes on
    out = {}
    t = threading.Thread(target=lambda: out.update(r=request("POST", "/v1/completions", {"model": "any", "prompt": "Once upon a time",
                                                                                         "max_tokens": 150 if LIGHT else 400, "ignore_eos": True})))
    t.start()
    busy = []
    for _ in range(200):
        busy = [s["id"] for s in slots() if s["is_processing"]]
        if busy:
            break
    check(busy, "no slot was seen processing a long request")
    if busy:
        st, r = action(busy[0], "save", {"filename": "busy.bin"})
        refused(st, r, 409, ["processing"], "saving a busy slot")
        st, r = action(busy[0], "erase")
        refused(st, r, 409, ["processing"], "erasing a busy slot")
    t.join()
    check(out.get("r", (0,))[0] == 200, f"the long request beside them: {out.get('r')}")
    check(not os.path.exists(os.path.join(slot_dir, "busy.bin")), "a busy slot's file was written")
    # the server still answers as before
    check(chat(Q1)[0] == a0, "the answer after the hostile requests differs")

elif phase == "restore":
    with open(state) as f:
        prev = json.load(f)
    check(all(s["n_cached"] == 0 for s in slots()), "a fresh server's slots hold nothing")
    st, r = action(0, "restore", {"filename": "sys.bin"})
    check(st == 200 and r.get("id_slot") == 0 and r.get("filename") == "sys.bin" and r.get("n_restored") == prev["n_saved"] and
          r.get("n_read") == os.path.getsize(os.path.join(slot_dir, "sys.bin")) and r.get("timings", {}).get("restore_ms", -1) >= 0,
          f"restore: {st} {r}")
    check(slots()[0]["n_cached"] == prev["n_saved"], f"slot 0 after the restore: {slots()}")
    # the system prompt and another question: its prefix comes from the file, the answer is the first server's
    b, n2, c2 = chat(Q2)
    check(b == prev["b0"], f"after a restore: {b!r}, without: {prev['b0']!r}")
    check(c2 > n2 // 2, f"after a restore the prompt reused {c2} of {n2} tokens")
    # erased: nothing to reuse; restored again: the whole first prompt but its last token
    st, r = action(0, "erase")
    check(st == 200 and r.get("id_slot") == 0 and r.get("n_erased", 0) > 0 and slots()[0]["n_cached"] == 0, f"erase: {st} {r}")
    st, r = action(0, "restore", {"filename": "sys.bin"})
    check(st == 200 and r.get("n_restored") == prev["n_saved"], f"restore again: {st} {r}")
    a, n1, c1 = chat(Q1)
    check(a == prev["a0"], f"after a restore: {a!r}, without: {prev['a0']!r}")
    check(c1 == n1 - 1, f"the saved prompt again: {c1} of {n1} tokens cached (want all but the last)")

elif phase == "noflag":
    for act in ["save", "restore"]:
        st, r = action(0, act, {"filename": "sys.bin"})
        refused(st, r, 501, ["--slot-save-path"], f"{act} without --slot-save-path")
    check(len(slots()) == 1, "GET /slots without the flag")
    st, r = action(0, "erase")
    check(st == 200 and r.get("n_erased") == 0, f"erase without the flag: {st} {r}")

elif phase == "chunks":
    a, n1, c1 = chat(Q1)
    check(c1 == 0 and n1 > 256, f"a fresh slot: {c1} of {n1} tokens cached (want 0 of over 256)")
    a2, n2, c2 = chat(Q1)
    check(c2 == (n1 - 1) // 256 * 256, f"the prompt again: {c2} of {n2} tokens cached (want its whole chunks before the last token)")
    check(a2 == a, f"the prompt again answers as before: {a2!r} vs {a!r}")
    b, n3, c3 = chat(Q2)
    check(c3 % 256 == 0 and 0 < c3 < n3, f"another question: {c3} of {n3} tokens cached (want whole chunks of the system prompt)")

elif phase == "share":
    with open(state) as f:
        prev = json.load(f)
    LONG = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Tell me about each city in turn, at length."}]
    out = {}
    t = threading.Thread(target=lambda: out.update(r=request("POST", "/v1/chat/completions", {
        "model": "any", "messages": LONG, "temperature": 0, "max_tokens": 150 if LIGHT else 400, "ignore_eos": True})))
    t.start()
    held = []
    for _ in range(2000):  # (until the long request's prompt is in its slot's cache)
        held = [s for s in slots() if s["is_processing"] and s["n_cached"] > 300]
        if held or "r" in out:
            break
    check(held, f"no slot was seen holding the long request's prompt: {slots()}")
    b, n2, c2 = chat(Q2)
    busy = "r" not in out
    t.join()
    check(out.get("r", (0,))[0] == 200, f"the long request beside it: {out.get('r')}")
    check(b == prev["b0"], f"with the prefix copied from the busy slot: {b!r}, alone: {prev['b0']!r}")
    check(not busy or c2 > n2 // 2, f"the question beside the busy slot reused {c2} of {n2} tokens (want its system prompt's)")
    st, m = request("GET", "/metrics")
    copied = [int(l.split()[1]) for l in (m if isinstance(m, str) else "").splitlines() if l.startswith("infer_prompt_tokens_copied_total ")]
    check(copied and copied[0] == c2, f"/metrics infer_prompt_tokens_copied_total {copied} (want {c2})")

report(f"test_slots {phase}")
