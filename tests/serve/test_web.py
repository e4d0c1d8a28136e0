"""infer serve's chat page in a real browser (Debian's chromium and
chromedriver, driven by selenium; nothing downloaded): the page loads, a
message typed and sent with Enter streams an answer that grows over several
observations and equals the API's greedy answer, the console stays clean,
and Stop frees the slot. usage: test_web.py BASE_URL SCREENSHOT.png"""
import json
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from checks import check, report

base, shot = sys.argv[1], sys.argv[2]


def api(path, body=None):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.read().decode()


def running():
    for line in api("/metrics").splitlines():
        if line.startswith("infer_requests_running "):
            return float(line.split()[1])


question = "Name three large cities in France and say one thing about each."
want = json.loads(api("/v1/chat/completions", {"messages": [{"role": "user", "content": question}], "temperature": 0,
                                               "max_tokens": 64}))["choices"][0]["message"]["content"]

opts = webdriver.ChromeOptions()
for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1000,800"):
    opts.add_argument(a)
opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
try:
    d.get(base + "/")
    check(d.title == "infer chat", f"the page's title: {d.title!r}")
    for field, value in (("temp", "0"), ("maxtok", "64")):
        e = d.find_element(By.ID, field)
        e.clear()
        e.send_keys(value)
    # every text the answer's element is given, recorded in the page as it
    # happens (a MutationObserver), so a fast model cannot outrun the polling
    d.execute_script("""
        window.seenTexts = [];
        new MutationObserver(rs => { for (const r of rs)
            if (r.target.classList && r.target.classList.contains('assistant'))
                for (const n of r.addedNodes) window.seenTexts.push(n.textContent); })
            .observe(document.getElementById('log'), {childList: true, subtree: true});""")
    box = d.find_element(By.ID, "input")
    box.send_keys(question)
    box.send_keys(Keys.ENTER)
    t0 = time.time()
    while time.time() - t0 < 60 and d.execute_script("return document.getElementById('send').disabled;"):
        time.sleep(0.02)  # until Send is enabled again
    seen = [t for t in d.execute_script("return window.seenTexts;") if t]
    final = seen[-1] if seen else None
    check(final == want, f"the page's answer equals the API's greedy answer ({final!r} vs {want!r})")
    check(len(seen) >= 3 and all(seen[i + 1].startswith(seen[i]) for i in range(len(seen) - 1)),
          f"the answer grew over at least three observations ({len(seen)}: {[len(s) for s in seen]})")
    meta = d.find_elements(By.CLASS_NAME, "meta")
    check(meta and "tokens/s" in meta[-1].text, f"the page shows tokens/s ({[m.text for m in meta]})")
    # Stop: a long answer stopped part way frees its slot
    box.send_keys("Write a very long story about a dragon.")
    box.send_keys(Keys.ENTER)
    t0 = time.time()
    while time.time() - t0 < 30 and not d.execute_script(
            "const a = document.querySelectorAll('.assistant'); return a.length > 1 && a[a.length - 1].textContent.length > 20;"):
        time.sleep(0.01)
    d.find_element(By.ID, "stop").click()
    t0 = time.time()
    while time.time() - t0 < 1 and running() != 0:
        time.sleep(0.02)
    check(running() == 0, "Stop frees the slot within 1 s")
    check(d.find_elements(By.CLASS_NAME, "meta")[-1].text == "stopped", "the page says it stopped")
    d.save_screenshot(shot)
    errors = [e for e in d.get_log("browser") if e.get("level") == "SEVERE"]
    check(not errors, f"no console errors ({errors})")
finally:
    d.quit()
report("web")
