# ruff: noqa
# mypy: ignore-errors
import json, sys

tags = sys.argv[1:]
sets = ["claude-docs", "openshift-4.15", "examples", "fastapi", "traefik", "duckdb", "chezmoi"]
keys = ["abstain", "partial", "offtopic_answer", "token_recall", "token_precision", "gold_cited"]
print("set | " + " | ".join(f"{k}" for k in keys) + " | median chars")
for s in sets:
    row = []
    for t in tags:
        try:
            d = json.load(open(f"/tmp/x45/ans-{t}-{s}.json"))["summary"]
        except Exception:
            row.append(None)
            continue
        row.append(d)
    if not all(row):
        continue
    cells = []
    for k in keys:
        cells.append(" / ".join(f"{(r.get(k) or {}).get('value') or 0:.3f}" for r in row))
    print(s, "|", " | ".join(cells), "|", " / ".join(str(r["median_chars"]) for r in row))
