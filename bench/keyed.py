"""Keyed answers measured on real questions, without the API: `fieldguide eval SET --answers` with
a key pointed at the Messages API stand-in in record and replay mode (tests/standins/keyed.py).

    python bench/keyed.py run SET [SET ...]     # a round: replay what is answered, record the rest
    python bench/keyed.py pending [SET ...]     # the requests still without a response
    python bench/keyed.py check [SET ...]       # the responses written so far, checked
    python bench/keyed.py serve SET [--port N]  # the stand-in alone, for `fieldguide eval` itself
    python bench/keyed.py report [SET ...]      # the finished sets' last rounds, into RESULTS.md

Each set's files are under bench/keyed/SET/: requests/<hash>.json (every request body the pipeline
sent), responses/<hash>.json (written by a language model outside the API, reading the request
alone: bench/keyed/README.md), eval.json (the last round's `fieldguide eval --answers --json`),
sample.json (the ids of the questions asked: each draw of DRAWS, SAMPLE of the set's
answerable and off-topic questions together, so each kind comes as often as the set has it; the
ids only, so that an answerer reading the folder sees no gold).
A round replays every request that has a response and records the others (they fail with a 400,
so that step runs offline); a set is done when a round records nothing new, and that round
removes the requests it did not make (an older pipeline's) and their responses. Only the answer
and its claim check are recorded: a classification gets the API's 529 overloaded_error at once (not
recorded; the offline router is what routes, as when Claude is overloaded), and the client does
not retry (max_retries 0), so no request waits on a retry's back-off.
`report` writes the section "keyed" of bench/RESULTS.md: each finished set's last round (no
request pending) beside the offline path on the same questions (offline.json, made once).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from harness import CHECK_SETS, QUESTION_SETS, ROOT, set_dir, table, write_section

from tests.standins.keyed import Keyed, described, pending, problems
from tests.standins.server import StubServer

KEYED = ROOT / "bench" / "keyed"
SAMPLE = 25  # questions a set's rounds ask: what blind answerers can answer in a sitting
# the draws, each of questions no earlier draw asked: the writer's prompt was revised reading
# the answers to the earlier draws' questions, so the last draw's are questions it was not
# written from, and the targets are judged on them
DRAWS = (0, 1, 2)
RECORDED = ("answer", "check")  # the requests an answer needs; others are refused (overloaded)


def items_of(name: str) -> list[dict]:
    """The set's questions, answerable then off-topic."""
    from bot.evaluation.retrieval import load_items

    off = set_dir(name) / "offtopic.jsonl"
    return load_items(set_dir(name) / "questions.jsonl") + (
        load_items(off) if off.is_file() else []
    )


def drawn(name: str) -> list[list[str]]:
    """The set's draws, in DRAWS order: SAMPLE questions each (answerable and off-topic
    together, so each kind comes as often as the set has it), each from those the earlier
    draws left."""
    pool, draws = [q["id"] for q in items_of(name)], []
    for seed in DRAWS:
        draws.append(random.Random(seed).sample(pool, min(SAMPLE, len(pool))))
        pool = [i for i in pool if i not in draws[-1]]
    return draws


def sampled(name: str, folder: Path, into: Path) -> tuple[Path, Path]:
    """The set's questions and off-topic questions of `folder`/sample.json (every draw's, drawn
    once and kept), written as the two files `fieldguide eval` reads, into `into`."""
    items = items_of(name)
    keep = folder / "sample.json"
    if not keep.exists():
        every = sorted(i for ids in drawn(name) for i in ids)
        keep.write_text(json.dumps(every, indent=1) + "\n", encoding="utf-8")
    ids = set(json.loads(keep.read_text(encoding="utf-8")))
    files = into / "questions.jsonl", into / "offtopic.jsonl"
    for path, gold in zip(files, (True, False), strict=True):
        chosen = [q for q in items if q["id"] in ids and bool(q["gold"]) == gold]
        path.write_text("".join(json.dumps(q) + "\n" for q in chosen), encoding="utf-8")
    return files


def asked(name: str, settings) -> dict:
    """`fieldguide eval SET --answers` on the set's sampled questions, with `settings`."""
    from bot.api import evaluate

    with tempfile.TemporaryDirectory() as tmp:
        questions, offtopic = sampled(name, KEYED / name, Path(tmp))
        return evaluate(
            set_dir(name), questions=questions, offtopic=offtopic, answers=True, settings=settings
        )


def round_of(name: str) -> dict:
    """One round of a set: `fieldguide eval SET --answers` with a key, against the keyed
    stand-in; its results are written to bench/keyed/SET/eval.json."""
    from bot.settings import Settings

    folder = KEYED / name
    keyed = Keyed(folder, kinds=RECORDED)
    server = StubServer()
    server.route("/v1/messages", keyed)
    try:
        settings = Settings(anthropic_api_key="keyed", anthropic_base_url=server.url, max_retries=0)
        result = asked(name, settings)
    finally:
        server.close()
    (folder / "eval.json").write_text(json.dumps(result, indent=1, ensure_ascii=False))
    if not keyed.recorded:  # finished: what an older pipeline asked goes (it is in git history)
        for kind in ("requests", "responses"):
            for path in (folder / kind).glob("*.json"):
                if path.stem not in keyed.replayed:
                    path.unlink()
    return {
        "set": name,
        "replayed": len(keyed.replayed),
        "recorded": len(keyed.recorded),
        "summary": result["summary"],
    }


def listed(names: list[str]) -> list[dict]:
    return [described(p) | {"set": n} for n in names for p in pending(KEYED / n)]


def check(names: list[str]) -> int:
    """Every response written so far against its request: 1 when one is not one the API could
    send (each problem printed), else 0."""
    bad = 0
    for name in names:
        for path in sorted((KEYED / name / "responses").glob("*.json")):
            request = KEYED / name / "requests" / path.name
            if not request.exists():
                print(f"{name}/{path.name}: no request of that name")
                bad += 1
                continue
            try:
                response = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as e:
                print(f"{name}/{path.name}: not JSON ({e})")
                bad += 1
                continue
            for p in problems(response, json.loads(request.read_text(encoding="utf-8"))):
                print(f"{name}/{path.name}: {p}")
                bad += 1
    print(f"{bad} problems")
    return 1 if bad else 0


def offline_of(name: str) -> dict:
    """The offline path (no key) on the set's sampled questions: bench/keyed/SET/offline.json,
    made once."""
    from bot.settings import Settings

    path = KEYED / name / "offline.json"
    if not path.exists():
        result = asked(name, Settings.load(environ={}, dotenv=None))
        path.write_text(json.dumps(result, indent=1, ensure_ascii=False))
    return json.loads(path.read_text(encoding="utf-8"))


def gold_read(result: dict, name: str) -> tuple[float | None, float | None]:
    """(first read, with the second looks): the share of answerable questions with a gold
    section in what the answer was given to read (any part of it, as bench/reads.py counts)."""
    from bot.evaluation.retrieval import load_items, matches

    gold = {q["id"]: q["gold"] for q in load_items(set_dir(name) / "questions.jsonl")}
    first, looked = [], []
    for a in result["answers"]:
        if not gold.get(a["id"]):
            continue
        read = a.get("read") or []
        more = [r for look in a.get("looks") or [] for r in look.get("read") or []]
        first.append(any(matches(r, g) for r in read for g in gold[a["id"]]))
        looked.append(any(matches(r, g) for r in read + more for g in gold[a["id"]]))
    if not first or not any(a.get("read") for a in result["answers"]):
        return None, None
    return sum(first) / len(first), sum(looked) / len(looked)


def answered(name: str) -> dict:
    """The set's requests and responses counted: requests, responses per kind, tool calls,
    NOT_IN_DOCS answers, pending requests."""
    folder = KEYED / name
    out = {"requests": 0, "answer": 0, "after a tool": 0, "check": 0, "tool calls": 0}
    out |= {"NOT_IN_DOCS": 0, "pending": len(pending(folder))}
    for path in sorted((folder / "requests").glob("*.json")):
        out["requests"] += 1
        response = folder / "responses" / path.name
        if not response.exists():
            continue
        d = described(path)
        kind = "after a tool" if d["kind"] == "answer" and d["after_tool"] else d["kind"]
        out[kind] = out.get(kind, 0) + 1
        blocks = json.loads(response.read_text(encoding="utf-8")).get("content") or []
        out["tool calls"] += sum(b.get("type") == "tool_use" for b in blocks)
        out["NOT_IN_DOCS"] += any(b.get("text", "").strip() == "NOT_IN_DOCS" for b in blocks)
    return out


def why_unsure(result: dict) -> list[int]:
    """(unsure; of them: the answer says a part is not covered, the claim check found a sentence
    unsupported, both, neither) over the answerable questions of `result`."""
    from router.question import CAVEATS

    caveats = [a["caveat"] or "" for a in result["answers"] if a["decision"] == "PARTIAL"]
    covered = [c.startswith(CAVEATS["not_covered"]) for c in caveats]
    unsupported = ["do not support" in c for c in caveats]
    pairs = list(zip(covered, unsupported, strict=True))
    return [len(caveats)] + [
        pairs.count(p) for p in ((True, False), (False, True), (True, True), (False, False))
    ]


def what_asked(name: str) -> dict[str, str]:
    """Each sampled answerable question of the set by what it asks against its docs, classified
    blind (bench/keyed/asked.json: helper agents who read the question and searched the docs,
    never the answers, scores or reference answers): "whole" (the docs hold what a complete
    answer needs), "part" (something asked is not in the docs), "none"."""
    path = KEYED / "asked.json"
    rows = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    return {r["id"]: r["class"] for r in rows if r["set"] == name}


def annotators_agree(names: list[str]) -> tuple[int, int]:
    """(questions both blind annotators put in the same class, questions classified twice) of
    the sets' samples."""
    path = KEYED / "asked.json"
    rows = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    asked = {(n, i) for n in names for i in json.loads((KEYED / n / "sample.json").read_text())}
    twice = [r for r in rows if r.get("second") and (r["set"], r["id"]) in asked]
    return sum(r["class"] == r["second"]["class"] for r in twice), len(twice)


def unsure_where_held(result: dict, name: str) -> tuple[int, int]:
    """(unsure, questions) among the answerable questions whose docs hold the whole answer."""
    classes = what_asked(name)
    held = [a for a in result["answers"] if classes.get(a["id"], "whole") == "whole"]
    return sum(a["decision"] == "PARTIAL" for a in held), len(held)


def against_docs(result: dict, name: str) -> list:
    """[set, answerable, the docs hold it all, a part asked is missing, nothing, the round's
    unsure where the docs hold it all, unsure and plain ANSWER where a part is missing]."""
    classes = what_asked(name)
    answers = result["answers"]
    whole = [a for a in answers if classes.get(a["id"]) == "whole"]
    short = [a for a in answers if classes.get(a["id"]) in ("part", "none")]

    def share(rows: list[dict], decision: str) -> str:
        n = sum(a["decision"] == decision for a in rows)
        return f"{n} of {len(rows)} ({n / len(rows):.3f})" if rows else "-"

    counts = [sum(classes.get(a["id"]) == c for a in answers) for c in ("whole", "part", "none")]
    return [name, len(answers), *counts] + [
        share(whole, "PARTIAL"),
        share(short, "PARTIAL"),
        share(short, "ANSWER"),
    ]


def feature_gaps(result: dict, name: str) -> list:
    """[set, unsure, of them with only an asked feature's absence named and another way given,
    unsure were those plain, off-topic plain ANSWER, off-topic partial with only such a gap,
    off-topic plain ANSWER were those plain]: what a writer that answers "the feature is not
    there, do this instead" plainly would trade (bench/keyed/gaps.json, classified blind)."""
    from router.question import CAVEATS

    path = KEYED / "gaps.json"
    rows = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    traded = {
        r["id"] for r in rows if r["set"] == name and r["class"] == "feature" and r["alternative"]
    }

    def count(answers: list[dict]) -> tuple[int, int]:
        partial = [a for a in answers if a["decision"] == "PARTIAL"]
        only = [a for a in partial if a["id"] in traded and a["caveat"] == CAVEATS["not_covered"]]
        return len(partial), len(only)

    answers, off = result["answers"], result["offtopic"]
    unsure, u_traded = count(answers)
    _, o_traded = count(off)
    plain = sum(a["decision"] == "ANSWER" for a in off)

    def share(n: int, of: int) -> str:
        return f"{n} of {of} ({n / of:.3f})" if of else "-"

    return [
        name,
        share(unsure, len(answers)),
        u_traded,
        share(unsure - u_traded, len(answers)),
        share(plain, len(off)),
        o_traded,
        share(plain + o_traded, len(off)),
    ]


def unsure_unless_recited(result: dict) -> str:
    """The unsure of `result`'s answerable questions (count and rate) had no sentence been cited
    where the docs state it (claims.recite): an answer with a re-cited sentence counted unsure,
    as the check would have found that sentence unsupported by what it cited."""
    answers = result["answers"]
    moved = [
        any("cited where the docs state them" in n for n in a.get("notes", [])) for a in answers
    ]
    unsure = [a["decision"] == "PARTIAL" or m for a, m in zip(answers, moved, strict=True)]
    return f"{sum(unsure)} ({sum(unsure) / len(unsure):.3f})" if unsure else "-"


def held(result: dict, name: str) -> list[str]:
    """[questions answered, the reference answer's words their gold sections hold; the same
    for the unsure]: the share of a maintainer's answer the docs could give at all, for the
    answerable questions answered (ANSWER) and those answered unsure (PARTIAL)."""
    import sqlite3

    from harness import eval_path

    from bot.evaluation.answers import load_stopwords, token_scores
    from bot.evaluation.retrieval import load_items, matches

    words = load_stopwords()
    with sqlite3.connect(eval_path(name)) as db:
        chunks = [
            {"doc": d, "heading_path": json.loads(h), "text": t}
            for d, h, t in db.execute("SELECT doc, heading_path, text FROM chunks")
        ]
    items = {q["id"]: q for q in load_items(set_dir(name) / "questions.jsonl")}
    shares: dict[str, list[float]] = {"ANSWER": [], "PARTIAL": []}
    for a in result["answers"]:
        q = items[a["id"]]
        gold = "\n".join(c["text"] for c in chunks if any(matches(c, g) for g in q["gold"]))
        shares.setdefault(a["decision"], []).append(token_scores(gold, q["answer"], words)[0])
    return [
        f"{len(v)}, {sum(v) / len(v):.3f}" if v else "0, -"
        for v in (shares["ANSWER"], shares["PARTIAL"])
    ]


TARGETS = (  # issue 50's targets for keyed answers: (figure, its label, met when)
    ("abstain", "refused", lambda v, off: v <= 0.10),
    ("partial", "unsure", lambda v, off: v <= 0.15),
    ("offtopic_answer", "off-topic plain ANSWER", lambda v, off: v <= 0.05),
    ("token_recall", "token recall", lambda v, off: v > off),
    ("gold_cited", "gold cited", None),
)


def spending(name: str, keyed: dict) -> list:
    """[set, questions, USD per 1,000 questions, looks per question, asked to look, written again
    (the rewrite stood)] of a round."""
    from bot.costs import stats
    from bot.prices import DEFAULT_PRICES

    every = keyed["answers"] + keyed["offtopic"]
    usages = [{"decision": "", "usage": a.get("usage") or {}, "feedback": {}} for a in every]
    usd = stats(usages, DEFAULT_PRICES)["cost_per_question_usd"]
    looks = sum(len(a["looks"]) for a in every) / max(1, len(every))
    asked = sum(bool(a.get("asked_to_look")) for a in every)
    again = [a["rewritten"] for a in every if a.get("rewritten")]
    stood = sum(r["stood"] for r in again)
    return [name, len(every), f"{usd * 1000:.2f}", f"{looks:.2f}", asked, f"{len(again)} ({stood})"]


def subset(result: dict, ids: list[str]) -> dict:
    """`result` with only the questions `ids`."""
    mine = set(ids)
    return result | {
        "answers": [a for a in result["answers"] if a["id"] in mine],
        "offtopic": [a for a in result["offtopic"] if a["id"] in mine],
    }


def interval(result: dict) -> str:
    """The 95% interval (Wilson's) of the unsure rate of `result`'s answerable questions: what
    the rate could be on more questions like these."""
    from scipy.stats import binomtest

    n = len(result["answers"])
    if not n:
        return "-"
    k = sum(a["decision"] == "PARTIAL" for a in result["answers"])
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return f"{ci.low:.2f}-{ci.high:.2f}"


def figures(result: dict) -> dict[str, float | None]:
    """Issue 50's figures (TARGETS) over the questions of `result`, as `fieldguide eval` sums
    them (bot/evaluation/answers.py `summarise`)."""
    from bot.evaluation.answers import summarise

    summary = summarise(result["answers"], result["offtopic"])
    return {k: summary[k]["value"] for k, *_ in TARGETS}


def report(names: list[str]) -> None:
    """The section "keyed" of bench/RESULTS.md: each finished set's last round beside the
    offline path on the same questions, the targets met or missed, what was answered."""
    rows, counts, unsure, met, left, plain, spent, docs = [], [], [], [], [], [], [], []
    draws: list[list] = []
    traded: list[list] = []
    for name in names:
        folder = KEYED / name
        tally = answered(name)
        if tally["pending"] or not (folder / "eval.json").exists():
            left.append(f"{name} ({tally['pending']} requests pending)")
            continue
        keyed = json.loads((folder / "eval.json").read_text(encoding="utf-8"))
        offline = offline_of(name)
        ks, os_ = keyed["summary"], offline["summary"]
        n = f"{name} ({ks['questions']} + {ks['offtopic_questions']} off-topic)"
        reads = {"keyed": gold_read(keyed, name), "offline": gold_read(offline, name)}
        for label, s in (("keyed", ks), ("offline", os_)):
            first, looked = reads[label]
            fell = sum(a["offline"] for a in keyed["answers"] + keyed["offtopic"])
            rows.append(
                [n, label]
                + [
                    f"{s[k]['value']:.3f}" if s[k]["value"] is not None else "-"
                    for k, *_ in TARGETS
                ]
                + [f"{first:.3f}" if first is not None else "-"]
                + [f"{looked:.3f}" if looked is not None else "-"]
                + [str(fell) if label == "keyed" else "-"]
            )
        counts.append([name] + [tally[k] for k in tally if k != "pending"])
        spent.append(spending(name, keyed))
        if what_asked(name):  # classified blind (asked.json, gaps.json)
            docs.append(against_docs(keyed, name))
            traded.append(feature_gaps(keyed, name))
        unsure.append(
            [
                name,
                *why_unsure(keyed),
                unsure_unless_recited(keyed),
                *held(keyed, name),
            ]
        )
        plain += [
            f"- {name} `{a['id']}`: “{' '.join(a['text'].split())[:100]}…”"
            for a in keyed["offtopic"]
            if a["decision"] == "ANSWER"
        ]
        every = drawn(name)
        # judged on the questions no revision of the writer's prompt was read from: the last
        # draw's, a check set's every draw
        judged = "all" if name in CHECK_SETS else DRAWS[-1]
        for seed, ids in [*zip(DRAWS, every, strict=True), ("all", sum(every, []))]:
            part = subset(keyed, ids)
            k, o = figures(part), figures(subset(offline, ids))
            if seed == judged:
                held_out, mine, theirs = part, k, o
            draws.append(
                [name, seed, f"{len(part['answers'])} + {len(part['offtopic'])}"]
                + [f"{k[f]:.3f}" if k[f] is not None else "-" for f, *_ in TARGETS[:3]]
                + [interval(part), f"{k['token_recall']:.3f} / {o['token_recall']:.3f}"]
            )
        verdicts = [
            f"{short} {'met' if ok(mine[k], theirs[k]) else 'missed'}"
            for k, short, ok in TARGETS
            if ok is not None and mine[k] is not None
        ]
        u, h = unsure_where_held(held_out, name)
        verdicts.append(
            f"unsure where the docs hold the answer {'met' if u <= 0.15 * h else 'missed'}"
        )
        looked = gold_read(held_out, name)[1]
        if looked is not None:
            verdicts.append(f"gold read with looks {'met' if looked >= 0.95 else 'missed'}")
        met.append(f"- {name}: " + ", ".join(verdicts) + ".")
    body = f"""## Keyed answers on real questions (`bench/keyed.py`, issue 50)

`python bench/keyed.py report`. **The responses were written by a language model outside the
API** (Claude, as fieldguide helper agents answering blind: each read only the request and
bench/keyed/README.md, never the questions' labels), not measured on the API: they are that
model's answers to the exact requests the pipeline sent. The real pipeline (parsing,
citations, claim check, decision, second looks in rounds) ran on them through the Messages API
stand-in in replay mode (tests/standins/keyed.py). Each set: {len(DRAWS)} draws of {SAMPLE}
questions (seeds {", ".join(map(str, DRAWS))}, each from the questions the earlier ones left:
answerable and off-topic as the set has them; bench/keyed/SET/sample.json); every
request but the answer and its claim check (a classification, a long question's condensing)
was answered "overloaded", so the offline router routed. Offline: the same questions with no
key (bench/keyed/SET/offline.json). Gold read: answerable questions with a gold section in what
the answer was given (the first read; with its second looks); the offline path gives nothing
to read. Steps offline: keyed questions whose trace says a step fell back to the offline path
(the condensing, answered overloaded).

""" + table(
        ["set (questions)", "run"]
        + [label for _, label, _ in TARGETS]
        + ["gold read, first", "gold read, with looks", "steps offline"],
        rows,
    )
    body += "\n\n" + table(
        [
            "set",
            "requests",
            "answers",
            "answers after a tool",
            "claim checks",
            "tool calls",
            "NOT_IN_DOCS",
        ],
        counts,
    )
    body += (
        "\n\nWhat the keyed questions cost: every request of the round billed by the stand-in"
        " as the API bills (prompt caching included: the system prompts, and the turns a look's"
        " round sends again; the questions asked in turn) and priced at"
        " bot/prices.py's list prices with the default models: the answer with its second looks"
        " and the claim check. Asked to look: answers that named a gap before any look and were"
        " asked once to look first (router/compose.py). Written again: answers whose claim check"
        " found a sentence unsupported, asked once more with those sentences named"
        " (router/review.py), and in brackets those whose rewrite stood.\n\n"
        + table(
            [
                "set",
                "questions",
                "USD per 1,000 questions",
                "looks per question",
                "asked to look",
                "written again (stood)",
            ],
            spent,
        )
    )
    body += "\n\nWhy a keyed answer to an answerable question is unsure (PARTIAL):\n\n" + table(
        [
            "set",
            "unsure",
            "the answer says the docs don't cover a part",
            "the claim check found a sentence unsupported",
            "both",
            "neither",
            "unsure had nothing been re-cited",
            "answered: questions, reference words the gold holds",
            "unsure: questions, reference words the gold holds",
        ],
        unsure,
    )
    body += (
        "\n\nUnsure had nothing been re-cited: the same round, an answer counted unsure when"
        " its claim check cited a sentence where the docs state it rather than where the answer"
        " cited it (router/claims.py `recite`)."
    )
    body += (
        "\n\nThe last two columns: the share of the reference answer's content words (a"
        " maintainer's reply on GitHub) that the question's gold sections hold at all, averaged"
        " over the questions answered and over those answered unsure: how much of what the"
        " asker was told the docs could give."
    )
    body += (
        "\n\nWhat each answerable question asks, against its docs: **classified by a language"
        " model outside the API** (Claude, as fieldguide helper agents, one per set or half-set),"
        " blind to the answers, the scores and the reference answers: each read the question and"
        " searched the set's docs, and put it in one class (bench/keyed/asked.json, with what is"
        " asked, where the docs hold it and what is missing): the docs hold all of it (an"
        ' explicit "not supported" counts), a part asked is missing, or nothing answers it.'
        " A partial answer is the right one where a part is missing. Other annotators, given"
        " the same brief and none of the first's output, classified them again (`second`):"
        " the same class for {} of {}.\n\n".format(*annotators_agree(names))
    )
    body += table(
        [
            "set",
            "answerable",
            "the docs hold it all",
            "a part asked is missing",
            "nothing",
            "unsure where the docs hold it all",
            "unsure where a part is missing",
            "plain ANSWER where a part is missing",
        ],
        docs,
    )
    body += (
        "\n\nWhat each gap named says is missing, **classified by a language model outside the"
        " API** (Claude, as a fieldguide helper agent, blind to which questions are off-topic:"
        " bench/keyed/gaps.json): a feature, option or command asked for, the asker's own case,"
        " or a detail, and whether the answer gives another documented way to the goal. An"
        " answer that says an asked feature is absent and gives another way is PARTIAL. Were it"
        " a plain ANSWER (those whose only caveat is that gap), unsure and off-topic plain ANSWER"
        " would be:\n\n"
        + table(
            ["set", "unsure", "its gap: a feature asked is absent, another way given"]
            + ["unsure, were those plain", "off-topic plain ANSWER"]
            + ["off-topic PARTIAL with such a gap", "off-topic plain ANSWER, were those plain"],
            traded,
        )
    )
    body += (
        "\n\nEach draw's questions apart, then all of them (answerable + off-topic; token recall"
        f" keyed / offline): the last draw, seed {DRAWS[-1]}, holds the questions no revision of"
        " the writer's prompt was read from, and so do all the draws of the check set"
        f" ({', '.join(CHECK_SETS)}: harness.CHECK_SETS). Unsure's 95% interval"
        " (Wilson's): where the rate could be on more questions like these.\n\n"
        + table(
            ["set", "seed", "questions", "refused", "unsure", "off-topic plain ANSWER"]
            + ["unsure, 95% interval", "token recall"],
            draws,
        )
        + "\n\nIssue 50's targets (refused ≤ 0.10, unsure ≤ 0.15, off-topic plain ANSWER ≤ 0.05,"
        " token recall above offline, gold read with second looks ≥ 0.95), per set, on the last"
        " draw's questions (the check set's: all of them):\n\n" + "\n".join(met)
    )
    if plain:
        body += "\n\nOff-topic questions given a plain ANSWER (keyed):\n\n" + "\n".join(plain)
    if left:
        body += "\n\nNot finished, so not reported: " + ", ".join(left) + "."
    write_section("keyed", body)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("run", "pending", "check", "serve", "report"))
    ap.add_argument("sets", nargs="*")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="pending: one JSON object a line")
    args = ap.parse_args()
    names = args.sets or list(QUESTION_SETS)
    if args.command == "run":
        for name in names:
            r = round_of(name)
            print(
                f"{name}: {r['replayed']} requests replayed,"
                f" {r['recorded']} recorded without a response"
            )
    elif args.command == "pending":
        rows = listed(names)
        if args.json:
            for r in rows:
                print(json.dumps(r))
            return
        print(
            table(
                ["set", "hash", "kind", "model", "bytes", "after a tool", "search results"],
                [
                    [
                        r["set"],
                        r["hash"],
                        r["kind"],
                        r["model"],
                        r["bytes"],
                        r["after_tool"],
                        r["search_results"],
                    ]
                    for r in rows
                ],
            )
        )
        print(f"{len(rows)} requests without a response, {sum(r['bytes'] for r in rows):,} bytes")
    elif args.command == "check":
        sys.exit(check(names))
    elif args.command == "report":
        report(names)
    elif args.command == "serve":
        [name] = names
        server = StubServer(port=args.port)
        server.route("/v1/messages", Keyed(KEYED / name, kinds=RECORDED))
        print(f"ANTHROPIC_BASE_URL={server.url} ANTHROPIC_API_KEY=keyed", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            server.close()


if __name__ == "__main__":
    main()
