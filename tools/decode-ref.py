#!/usr/bin/env python3
"""Makes testdata/refs/NAME.decode-ref.json.gz: what Debian's llama-server
computes when it prefills a long prompt and then decodes greedily, the
reference cmd/glmrun's TestLongDecodeMatchesLlamaCpp compares glmrun's
logits with (prefill, then decode, beyond the DSA indexer's top_k).

The prompt is the first N tokens (default 6144) of testdata/tinyglm/heldout.txt
as llama-server's /tokenize gives them, without special tokens; the server
prefills it (its default batch of 2048 in ubatches of 512) and decodes
--steps tokens (default 64) one at a time at temperature 0 (greedy), with the
--top log-probabilities (default 20) of the raw distribution at every step
(one request per step with the prompt cache on, so that each step after the
first evaluates one new token).
The file holds the prompt's ids, the command and version, and per step the
chosen id and the top ids with their log-probabilities (none for a token that
ends inside a UTF-8 character: the server sends no probabilities for it).

Run from the repository root on a Debian system with the llama.cpp-tools
package (the sid chroot), with the model made by glmrun synth with the flags
of cmd/glmrun's glmDSAWidths:

    python3 tools/decode-ref.py .scratch/glm-dsa-widths.gguf
    python3 tools/decode-ref.py .scratch/glm-dsa-widths.gguf -- -ctk q8_0

Arguments after -- go to llama-server (and name the file: "-ctk q8_0" gives
NAME.ctk-q8_0.decode-ref.json.gz).
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import time
import urllib.request


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as r:
        return json.load(r)


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, default=6144)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--port", type=int, default=18431)
    ap.add_argument("--text", default="testdata/tinyglm/heldout.txt")
    a = ap.parse_args(argv)

    name = os.path.basename(a.model).removesuffix(".gguf")
    suffix = "".join("." + x.lstrip("-") if x.startswith("-") else "-" + x for x in extra)
    out = f"testdata/refs/{name}{suffix}.decode-ref.json.gz"
    ctx = a.tokens + a.steps + 64
    cmd = ["llama-server", "-m", a.model, "-c", str(ctx), "-t", "2", "-np", "1", "--port", str(a.port)] + extra
    version = subprocess.run(["llama-server", "--version"], capture_output=True, text=True)
    version = (version.stdout + version.stderr).strip().splitlines()[0]
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open("/tmp/decode-ref-server.log", "w"))
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{a.port}/health", timeout=5) as r:
                    if json.load(r).get("status") == "ok":
                        break
            except OSError:
                pass
            if srv.poll() is not None:
                sys.exit("llama-server exited: see /tmp/decode-ref-server.log")
            time.sleep(1)
        text = open(a.text, encoding="utf-8").read()
        ids = post(a.port, "/tokenize", {"content": text, "add_special": False})["tokens"]
        if len(ids) < a.tokens:
            sys.exit(f"{a.text}: {len(ids)} tokens, fewer than --tokens {a.tokens}")
        prompt = ids[:a.tokens]
        # One request per step, each adding the last chosen token, with the
        # prompt cache on: the first prefills the prompt, every later one
        # evaluates one new token (a decode step) and returns the
        # distribution of the next. One request per token also keeps the
        # server from merging the entries of tokens that split a UTF-8
        # character.
        steps, seq = [], list(prompt)
        t0 = time.time()
        for k in range(a.steps):
            res = post(a.port, "/completion", {
                "prompt": seq, "n_predict": 1, "n_probs": a.top, "temperature": 0,
                "cache_prompt": True, "post_sampling_probs": False, "ignore_eos": True, "return_tokens": True,
            })
            probs = res.get("completion_probabilities", [])
            if len(res.get("tokens", [])) != 1 or len(probs) > 1:
                with open("/tmp/decode-ref-bad.json", "w") as f:
                    json.dump(res, f)
                sys.exit(f"step {k}: {len(res.get('tokens', []))} tokens, {len(probs)} probability entries, want 1")
            # A token that ends inside a UTF-8 character comes without its
            # probabilities (the server holds its text back): the step keeps
            # the chosen id only.
            top = [[t["id"], t["logprob"]] for t in probs[0]["top_logprobs"]] if probs else []
            tok = res["tokens"][0]
            if top and top[0][0] != tok:
                sys.exit(f"step {k}: the greedy token {tok} is not the most probable {top[0][0]}")
            steps.append({"id": tok, "top": top})
            seq.append(tok)
            if k == 0:
                prefill_secs = time.time() - t0
        secs = time.time() - t0
    finally:
        srv.terminate()
        srv.wait()
    ref = {
        "version": version,
        "command": " ".join(cmd),
        "request": {"n_predict": 1, "n_probs": a.top, "temperature": 0, "cache_prompt": True,
                    "note": "one request per step, the prompt growing by the chosen token"},
        "prompt": prompt,
        "steps": steps,
    }
    with gzip.open(out, "wt", encoding="utf-8") as f:
        json.dump(ref, f, separators=(",", ":"))
    print(f"{out}: {len(prompt)} prompt tokens ({prefill_secs:.0f} s), {len(steps)} steps ({secs:.0f} s in all)")


if __name__ == "__main__":
    main()
