"""Summarizes an Autobahn|Testsuite report (its index.json) for one agent, tincan: how many
cases ended each way, which failed (none may), and each case that was not plainly OK.

    python3 summarize.py REPORT/index.json "what was tested" "tincan VERSION"
"""
import collections
import json
import sys

cases = json.load(open(sys.argv[1]))["tincan"]


def key(case):
    return [int(part) for part in case.split(".")]


counts = collections.Counter((v["behavior"], v["behaviorClose"]) for v in cases.values())
print(f"Autobahn|Testsuite (autobahntestsuite 25.10.1, autobahn 0.10.9): {sys.argv[2]}, {sys.argv[3]}")
sections = sorted({case.split(".")[0] for case in cases}, key=int)
print(f"{len(cases)} cases, sections {', '.join(sections)}")
for (behavior, close), n in sorted(counts.items()):
    print(f"  {n:4} {behavior} (close: {close})")
failed = [c for c, v in cases.items() if v["behavior"] not in ("OK", "NON-STRICT", "INFORMATIONAL") or v["behaviorClose"] not in ("OK", "INFORMATIONAL")]
print(f"failed: {len(failed)}" + (": " + " ".join(sorted(failed, key=key)) if failed else ""))
for case in sorted(cases, key=key):
    result = cases[case]
    if result["behavior"] != "OK" or result["behaviorClose"] != "OK":
        print(f"  {case}: {result['behavior']} (close: {result['behaviorClose']})")
