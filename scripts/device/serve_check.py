#!/usr/bin/env python3
"""Checks a hyspec server on the GPU against the same server on the CPU (scripts/device/serve.sh).

Standard library only (the device machine installs nothing). Every check is recorded in the JSON
written to --out; the exit status is 1 when any failed.
"""
import argparse
import concurrent.futures
import json
import sys
import time
import urllib.error
import urllib.request

PROMPTS = [
    "In the beginning God created",
    "And the LORD said unto Moses,",
    "Blessed are the poor in spirit: for theirs is the kingdom of heaven. Blessed are",
    "And it came to pass, when the king heard",
]
STRATEGIES = ["replay", "intermediate-copy"]


def call(base, path, body=None, timeout=120):
    """(status, parsed JSON or text) of one request."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read().decode()
            status = r.status
    except urllib.error.HTTPError as e:
        raw = e.read().decode()
        status = e.code
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw


def wait_ready(base, seconds=240):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            status, _ = call(base, "/q/health/ready", timeout=5)
            if status == 200:
                return True
        except OSError:
            pass
        time.sleep(1)
    return False


def completion(base, prompt, strategy, spec=True, max_tokens=48):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "rollback_strategy": strategy,
            "speculative": {"method": "ngram", "num_tokens": 4} if spec else {"method": "none"}}
    status, out = call(base, "/v1/completions", body)
    if status != 200:
        raise RuntimeError(f"/v1/completions answered {status}: {out}")
    return out["choices"][0]["text"], out.get("usage", {})


def sse_chat(base, messages, max_tokens=32):
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True}
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    pieces, events, done = [], 0, False
    with urllib.request.urlopen(req, timeout=120) as r:
        content_type = r.headers.get("Content-Type", "")
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                done = True
                break
            events += 1
            delta = json.loads(payload)["choices"][0].get("delta", {})
            pieces.append(delta.get("content") or "")
    return "".join(pieces), events, done, content_type


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--cpu", required=True)
    ap.add_argument("--gpu-log", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    checks = []

    def check(name, ok, detail=""):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
        print(("PASS " if ok else "FAIL ") + name + (f": {detail}" if detail else ""), flush=True)

    t0 = time.time()
    ready = wait_ready(a.gpu), wait_ready(a.cpu)
    check("both servers ready", all(ready), f"gpu {ready[0]}, cpu {ready[1]} after {time.time() - t0:.0f} s")
    if not all(ready):
        return finish(a.out, checks)
    log = open(a.gpu_log, encoding="utf-8", errors="replace").read()
    chose = [l.strip() for l in log.splitlines() if "hyspec.backend=auto" in l or "cuda backend on" in l]
    check("auto chose the cuda backend and logged it",
          any("serving on the cuda backend" in l for l in chose), " | ".join(chose)[-400:])

    status, models = call(a.gpu, "/v1/models")
    check("GET /v1/models", status == 200 and len(models.get("data", [])) == 1,
          str(models)[:200])

    # greedy completions: the GPU (float32 activations) gives the CPU's tokens, under both strategies,
    # and speculative decoding is lossless on the GPU
    for prompt in PROMPTS:
        cpu_text, _ = completion(a.cpu, prompt, "replay", spec=False)
        gpu_plain, _ = completion(a.gpu, prompt, "replay", spec=False)
        check(f"gpu no-spec == cpu: {prompt[:30]!r}", gpu_plain == cpu_text, f"{gpu_plain[:60]!r} vs {cpu_text[:60]!r}")
        for strategy in STRATEGIES:
            gpu_text, usage = completion(a.gpu, prompt, strategy)
            check(f"gpu {strategy} == cpu: {prompt[:30]!r}", gpu_text == cpu_text,
                  f"{gpu_text[:60]!r}; usage {usage}")

    # continuous batching on the GPU: concurrent requests (mixed strategies) give their sequential outputs
    jobs = [(p, s) for p in PROMPTS for s in STRATEGIES] * 2
    expected = {p: completion(a.cpu, p, "replay", spec=False)[0] for p in PROMPTS}
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        got = list(pool.map(lambda j: completion(a.gpu, j[0], j[1])[0], jobs))
    wrong = [j for j, g in zip(jobs, got) if g != expected[j[0]]]
    check(f"{len(jobs)} concurrent gpu requests match the cpu", not wrong, f"mismatched: {wrong}")

    # SSE: a streamed chat completion equals the same request unstreamed
    messages = [{"role": "user", "content": "Who created the heaven and the earth?"}]
    streamed, events, done, ctype = sse_chat(a.gpu, messages)
    status, whole = call(a.gpu, "/v1/chat/completions",
                         {"messages": messages, "max_tokens": 32, "temperature": 0})
    whole_text = whole["choices"][0]["message"]["content"] if status == 200 else None
    check("SSE chat stream == unstreamed chat", done and events > 1 and streamed == whole_text
          and ctype.startswith("text/event-stream"),
          f"{events} events, [DONE] {done}, {ctype}; {streamed[:60]!r} vs {str(whole_text)[:60]!r}")

    # bad input: an OpenAI-style error, and the server goes on serving
    status, err = call(a.gpu, "/v1/completions", {"prompt": "x", "max_tokens": -1})
    check("bad request -> 400 with an OpenAI error body",
          status == 400 and isinstance(err, dict) and "error" in err, f"{status} {str(err)[:200]}")
    text, _ = completion(a.gpu, PROMPTS[0], "replay")
    check("serves after the bad request", text == expected[PROMPTS[0]])

    status, metrics = call(a.gpu, "/q/metrics")
    lines = metrics.splitlines() if isinstance(metrics, str) else []
    per_strategy = {s: any(f'strategy="{s}"' in l for l in lines if l.startswith("hyspec_")) for s in STRATEGIES}
    check("Prometheus metrics per strategy", status == 200 and all(per_strategy.values()), str(per_strategy))
    status, live = call(a.gpu, "/q/health/live")
    check("liveness", status == 200, str(live)[:200])
    return finish(a.out, checks)


def finish(path, checks):
    failed = [c for c in checks if not c["ok"]]
    with open(path, "w") as f:
        json.dump({"passed": len(checks) - len(failed), "failed": len(failed), "checks": checks}, f, indent=2)
    print(f"{len(checks) - len(failed)} of {len(checks)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
