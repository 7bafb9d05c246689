"""A second blind checker on the same claim-check requests: per-sentence agreement with the
recorded checks, and the keyed round replayed with the second checker's verdicts.

    python bench/second_check.py [SET ...]

bench/keyed/SET/second-check/<hash>.json: the second checker's responses (Claude, fieldguide
helper agents, blind, outside the API). The recorded responses are put back after.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEYED = ROOT / "bench" / "keyed"
PY = sys.executable


def verdicts(path: Path) -> list[str]:
    return [v["verdict"] for v in json.loads(path.read_text())["json"]["sentences"]]


def main() -> None:
    names = sys.argv[1:] or ["fastapi", "traefik", "duckdb", "chezmoi"]
    for name in names:
        folder = KEYED / name / "responses"
        pairs, same, flips = 0, 0, Counter[tuple[str, str]]()
        for b in sorted((KEYED / name / "second-check").glob("*.json")):
            a = folder / b.name
            va, vb = verdicts(a), verdicts(b)
            assert len(va) == len(vb), b.name
            for x, y in zip(va, vb, strict=True):
                pairs += 1
                same += x == y
                if x != y:
                    flips[(x, y)] += 1
        evaluated = KEYED / name / "eval.json"
        kept = evaluated.read_bytes()
        first = json.loads(kept)
        saved = {p.name: p.read_bytes() for p in folder.glob("*.json")}
        try:
            for b in (KEYED / name / "second-check").glob("*.json"):
                shutil.copy(b, folder / b.name)
            subprocess.run(
                [PY, str(ROOT / "bench" / "keyed.py"), "run", name], check=True, capture_output=True
            )
            other = json.loads(evaluated.read_text())
        finally:
            for n, data in saved.items():
                (folder / n).write_bytes(data)
            evaluated.write_bytes(kept)
        da = {a["id"]: a["decision"] for a in first["answers"]}
        db = {a["id"]: a["decision"] for a in other["answers"]}
        agree = sum(da[k] == db[k] for k in da)
        ua = sum(v == "PARTIAL" for v in da.values()) / len(da)
        ub = sum(v == "PARTIAL" for v in db.values()) / len(db)
        print(
            f"{name}: sentences {same}/{pairs} same verdict ({same / pairs:.3f});"
            f" answerable decisions {agree}/{len(da)} same; unsure recorded {ua:.3f},"
            f" second checker {ub:.3f}; flips {dict(flips.most_common(4))}"
        )


if __name__ == "__main__":
    main()
