#!/usr/bin/env python3
"""The jobs of tests/bench/fault_run.sh: WAVES OpenAI Batch input files
(w000.jsonl, w001.jsonl, ...) for the model named `m`, the same for the same
seed. Wave 0 holds 40 lines, the others 16. Every line is a /v1/completions
request with ignore_eos: greedy (temperature 0) or seeded sampling, a varied
prompt and max_tokens, and some with n > 1, logprobs or stop strings."""
import argparse
import json
import os
import random

WORDS = ("the night shift keeps a lighthouse by the harbour where ships wait for the tide; a writer drafts "
         "letters to her brother about rivers, engines, bread, snow, maps and the slow arithmetic of stars. "
         "Quantum ledgers hum; seven owls audit the orchard at dawn, and nobody reads the footnotes twice.").split()
STOPS = (["\n"], ["e"], [" th", "qu"], ["."], ["ing", "!"])


def line(rng, custom_id):
    body = {"model": "m", "ignore_eos": True}
    body["prompt"] = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 48)))
    body["max_tokens"] = rng.choice((4, 9, 16, 24, 33, 48, 64, 80, 100, 128, 160))
    if rng.random() < 0.6:
        body["temperature"] = 0
        if rng.random() < 0.1:
            body["n"] = 2  # greedy choices: all the same text
    else:
        body.update(temperature=round(rng.uniform(0.5, 1.2), 2), top_p=0.95, seed=rng.randint(0, 2**31))
        r = rng.random()
        if r < 0.25:
            body["n"] = 2
        elif r < 0.4:
            body["n"] = 3
    if rng.random() < 0.25:
        body["logprobs"] = rng.randint(0, 3)
    if rng.random() < 0.2:
        body["stop"] = rng.choice(STOPS)
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/completions", "body": body}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--waves", type=int, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    for w in range(a.waves):
        with open(os.path.join(a.out, "w%03d.jsonl" % w), "w", encoding="utf-8") as f:
            for j in range(40 if w == 0 else 16):
                f.write(json.dumps(line(rng, "w%03d-j%02d" % (w, j))) + "\n")


if __name__ == "__main__":
    main()
