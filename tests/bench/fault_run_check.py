#!/usr/bin/env python3
"""The verdict of tests/bench/fault_run.sh: compares the fault run's jobs
(JSON lines dumped from its queue) with the uninterrupted reference's, checks
the attempts history, prints a summary table, and exits 1 on any finding."""
import argparse
import collections
import json
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(x) for x in f if x.strip()]


def choices(v):
    if v is None:
        return None
    return json.loads(v) if isinstance(v, str) else v


def main():
    ap = argparse.ArgumentParser()
    for k in ("fault", "attempts", "reference", "done-twice", "checkpoints-left", "backend", "seed", "duration",
              "elapsed", "faults", "unexpected-exits", "unexpected-detail", "starts", "notes"):
        ap.add_argument("--" + k, required=True)
    a = ap.parse_args()
    fault, ref, attempts = load(a.fault), load(a.reference), load(a.attempts)
    findings = []

    by_cid = collections.defaultdict(list)
    for j in fault:
        by_cid[j["custom_id"]].append(j)
    ref_by_cid = {j["custom_id"]: j for j in ref}
    dup_rows = [c for c, rows in by_cid.items() if len(rows) > 1]
    lost = [c for c in ref_by_cid if c not in by_cid]
    extra = [c for c in by_cid if c not in ref_by_cid]
    not_done = [j for j in fault if j["state"] != "done" or not j["has_result"]]
    ref_not_done = [j for j in ref if j["state"] != "done" or not j["has_result"]]
    if dup_rows:
        findings.append("custom_ids queued twice: %s" % dup_rows[:10])
    if lost:
        findings.append("jobs lost (in the reference, not in the queue): %s" % lost[:10])
    if extra:
        findings.append("jobs in the queue but not in the reference: %s" % extra[:10])
    if not_done:
        findings.append("jobs not done: %s" % [(j["id"], j["custom_id"], j["state"]) for j in not_done[:10]])
    if ref_not_done:
        findings.append("reference jobs not done: %s" % [(j["custom_id"], j["state"]) for j in ref_not_done[:10]])

    mismatches = collections.Counter()
    examples = []
    for cid, rows in by_cid.items():
        r = ref_by_cid.get(cid)
        if r is None or len(rows) != 1 or not rows[0]["has_result"]:
            continue
        j = rows[0]
        for field in ("text", "finish_reason", "prompt_tokens", "completion_tokens", "logprobs"):
            if j[field] != r[field]:
                mismatches[field] += 1
                if len(examples) < 8:
                    examples.append("%s (job %s) %s: %r vs reference %r" % (cid, j["id"], field, str(j[field])[:80],
                                                                          str(r[field])[:80]))
        if choices(j["choices"]) != choices(r["choices"]):
            mismatches["choices"] += 1
            if len(examples) < 8:
                examples.append("%s (job %s) choices: %s vs reference %s" % (
                    cid, j["id"], str(j["choices"])[:120], str(r["choices"])[:120]))
    jobs_mismatched = sum(1 for cid, rows in by_cid.items() if len(rows) == 1 and cid in ref_by_cid and rows[0][
        "has_result"] and (
        any(rows[0][f] != ref_by_cid[cid][f] for f in ("text", "finish_reason", "prompt_tokens", "completion_tokens",
                                                       "logprobs"))
        or choices(rows[0]["choices"]) != choices(ref_by_cid[cid]["choices"])))
    if mismatches:
        findings.append("outputs differing from the reference: %d jobs (%s)" % (
            jobs_mismatched, ", ".join("%s %d" % kv for kv in sorted(mismatches.items()))))

    # The attempts history: one `done` attempt per job, the last claim, by the worker the job names.
    by_job = collections.defaultdict(list)
    for t in attempts:
        by_job[t["job_id"]].append(t)
    outcomes = collections.Counter(t["outcome"] for t in attempts)
    bad_history = []
    for j in fault:
        hist = sorted(by_job.get(j["id"], []), key=lambda t: t["attempt"])
        done = [t for t in hist if t["outcome"] == "done"]
        why = None
        if len(done) != 1:
            why = "%d done attempts" % len(done)
        elif hist[-1] is not done[0]:
            why = "the done attempt is not the last"
        elif done[0]["attempt"] != j["attempt"]:
            why = "jobs.attempt %s but the done attempt is %s" % (j["attempt"], done[0]["attempt"])
        elif done[0]["worker"] != j["worker"]:
            why = "jobs.worker %s but the done attempt's worker is %s" % (j["worker"], done[0]["worker"])
        elif any(t["outcome"] is None for t in hist):
            why = "an attempt never ended"
        elif len({t["attempt"] for t in hist}) != len(hist):
            why = "attempt numbers repeat"
        if why:
            bad_history.append("job %s (%s): %s: %s" % (j["id"], j["custom_id"], why,
                                                        [(t["attempt"], t["worker"], t["outcome"]) for t in hist]))
    if bad_history:
        findings.append("attempt histories inconsistent: %d jobs, e.g. %s" % (len(bad_history), bad_history[:5]))
    with open(a.done_twice, encoding="utf-8") as f:
        twice = f.read().split()
    if twice:
        findings.append("jobs logged `done` by two attempts: %s" % twice[:10])
    if a.checkpoints_left != "0":
        findings.append("%s checkpoints left after every job finished" % a.checkpoints_left)
    if a.unexpected_exits != "0":
        findings.append("daemons that exited on their own: %s (%s)" % (a.unexpected_exits, a.unexpected_detail))

    resumed = sum(1 for t in attempts if t["outcome"] == "done" and (t["resumed_tokens"] or 0) > 0)
    multi = sum(1 for h in by_job.values() if len(h) > 1)
    rows = [
        ("backend", a.backend), ("seed", a.seed), ("fault phase / whole run", "%s s / %s s" % (a.duration, a.elapsed)),
        ("faults injected/skipped by kind", a.faults.strip()), ("daemon starts", a.starts),
        ("jobs (reference)", "%d (%d)" % (len(fault), len(ref))),
        ("jobs done", sum(1 for j in fault if j["state"] == "done")),
        ("jobs with more than one attempt", multi), ("done attempts resumed from a checkpoint", resumed),
        ("attempt outcomes", ", ".join("%s %d" % (k, v) for k, v in sorted(outcomes.items(), key=lambda kv: str(kv[0])))),
        ("n > 1 jobs / logprobs jobs", "%d / %d" % (sum(1 for j in fault if j["choices"]),
                                                   sum(1 for j in fault if j["logprobs"]))),
        ("lost / queued twice / not done", "%d / %d / %d" % (len(lost), len(dup_rows), len(not_done))),
        ("jobs differing from the reference", jobs_mismatched),
        ("inconsistent attempt histories", len(bad_history)),
        ("jobs logged done twice", len(twice)),
        ("daemons exiting on their own", a.unexpected_exits),
    ]
    if a.notes.strip("; "):
        rows.append(("notes", a.notes.strip("; ")))
    width = max(len(k) for k, _ in rows)
    print("=" * 100)
    for k, v in rows:
        print("%-*s  %s" % (width, k, v))
    for e in examples:
        print("  differs: " + e)
    print("RESULT: " + ("FINDINGS" if findings else "OK: every job done exactly once, identical to the reference"))
    for f in findings:
        print("  - " + f)
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()
