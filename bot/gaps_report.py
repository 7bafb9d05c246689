"""`fieldguide gaps --html FILE`: one self-contained page (inline SVG, no external script, style or
font) a docs owner can open or be sent: the period it covers, questions per day by outcome, how
each intent's questions fared, and the top gaps with links to the nearest docs. The plots take the
page's whole width. A small inline script marks the page once its plots have a drawn size
(`data-drawn` on <body>, and `data-plot-share`: the narrowest plot's share of the window's
width) and writes any script error or console.error into #errors (and
`data-errors` on <html>), so a browser test can read both from the DOM."""

from __future__ import annotations

from collections import Counter, defaultdict
from html import escape

from .gaps import KINDS, Topic, confirmed, top_intent, unanswered

# what became of a question, as the report counts it: confirmed (a 👍, no 👎 or hand-off),
# answered but nobody said whether it was right, or not answered well (gaps.unanswered)
OUTCOMES = {
    "confirmed": ("answered, marked helpful", "#2e7d32"),
    "unrated": ("answered, not rated", "#9ccc65"),
    "gap": ("not answered well", "#c62828"),
}
WIDTH = 1200  # the plots' coordinate width; they are drawn at the page's width
LABEL_CHARS = 48  # a bar's label, cut at a word
TOP_GAPS = 10

SCRIPT = """
function reportError(msg) {
  document.documentElement.setAttribute('data-errors', 'yes');
  var e = document.getElementById('errors');
  if (e) e.textContent += 'error: ' + msg + '\\n';
}
window.onerror = function (msg) { reportError(msg); };
var consoleError = console.error;
console.error = function () {
  reportError(Array.prototype.join.call(arguments, ' '));
  consoleError.apply(console, arguments);
};
window.addEventListener('load', function () {
  var drawn = 0, narrowest = 1;
  document.querySelectorAll('svg.plot').forEach(function (svg) {
    var box = svg.getBBox();
    if (box.width > 0 && box.height > 0 && svg.querySelectorAll('rect.bar').length) drawn++;
    narrowest = Math.min(narrowest, svg.getBoundingClientRect().width / window.innerWidth);
  });
  document.body.setAttribute('data-drawn', String(drawn));
  document.body.setAttribute('data-plot-share', narrowest.toFixed(2));
});
"""

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 1.5em 2em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin-top: 1.8em; }
.period { color: #555; margin-top: 0; }
svg.plot { display: block; width: 100%; height: auto; }
svg text { font: 13px system-ui, sans-serif; fill: #222; }
.legend span { display: inline-block; margin-right: 1.2em; }
.legend i { display: inline-block; width: 11px; height: 11px; margin-right: 5px; }
ol.gaps > li { margin-bottom: 0.8em; } ol.gaps ul { color: #444; } p.said { margin: 0.2em 0; }
.note { color: #555; }
#errors { color: #c62828; white-space: pre; }
"""


def plural(n: int, word: str) -> str:
    """ "1 question", "3 questions"."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def shorten(text: str, limit: int = LABEL_CHARS) -> str:
    """`text` in at most `limit` characters, cut at a word with "…" when it is longer."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[:limit]  # room for the "…" is what the last word (or its space) leaves
    cut = head.rsplit(" ", 1)[0] if " " in head else head[: limit - 1]
    return cut.rstrip(" ,;:-–—") + "…"


def outcome(row: dict) -> str:
    if unanswered(row):
        return "gap"
    return "confirmed" if confirmed(row) else "unrated"


def _svg(height: int, body: list[str], label: str) -> str:
    return (
        f'<svg class="plot" role="img" aria-label="{escape(label)}" viewBox="0 0 {WIDTH} {height}"'
        f' preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">'
        + "".join(body)
        + "</svg>"
    )


def legend() -> str:
    return (
        '<p class="legend">'
        + "".join(f'<span><i style="background:{c}"></i>{t}</span>' for t, c in OUTCOMES.values())
        + "</p>"
    )


def per_day(rows: list[dict]) -> str:
    """Stacked bars: questions per day, by outcome."""
    days: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        days[r["created"][:10]][outcome(r)] += 1
    if not days:
        return "<p>No questions in this period.</p>"
    order = sorted(days)
    top = max(sum(c.values()) for c in days.values())
    height, left, bottom = 240, 40, 40
    step = (WIDTH - left - 10) / len(order)
    body = [
        f'<line x1="{left}" y1="{height - bottom}" x2="{WIDTH - 10}" y2="{height - bottom}"'
        ' stroke="#999"/>',
        f'<text x="4" y="16">{top}</text>',
    ]
    for i, day in enumerate(order):
        y = float(height - bottom)
        width = min(step * 0.8, 60.0)  # a few days' bars are bars, not walls
        x = left + i * step + (step - width) / 2
        for name, (text, colour) in OUTCOMES.items():
            n = days[day][name]
            if not n:
                continue
            h = (height - bottom - 20) * n / top
            y -= h
            body.append(
                f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{width:.1f}"'
                f' height="{h:.1f}" fill="{colour}"><title>{day}: {plural(n, "question")}'
                f" {text}</title></rect>"
            )
        if len(order) <= 16 or i % max(1, len(order) // 8) == 0:
            body.append(f'<text x="{x:.1f}" y="{height - bottom + 18}">{day[5:]}</text>')
    return _svg(height, body, "questions per day by outcome") + legend()


def per_intent(rows: list[dict]) -> str:
    """One stacked bar per intent (as the router gave it): the share of its questions answered
    and marked helpful, answered but not rated, and not answered well."""
    by_intent: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        by_intent[top_intent(r) or "(none)"][outcome(r)] += 1
    if not by_intent:
        return "<p>No questions in this period.</p>"
    row, left, right = 28, 260, 250
    ordered = sorted(by_intent.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    body = []
    for i, (intent, c) in enumerate(ordered):
        total = sum(c.values())
        y, x = 5 + i * row, float(left)
        body.append(f'<text x="0" y="{y + 16}">{escape(shorten(intent, 32))}</text>')
        for name, (text, colour) in OUTCOMES.items():
            if not c[name]:
                continue
            w = (WIDTH - left - right) * c[name] / total
            body.append(
                f'<rect class="bar" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 8}"'
                f' fill="{colour}"><title>{escape(intent)}: {c[name]} of {total} {text}'
                "</title></rect>"
            )
            x += w
        note = f"{c['confirmed'] / total:.0%} helpful · {c['gap'] / total:.0%} gaps · of {total}"
        body.append(f'<text x="{WIDTH - right + 10}" y="{y + 16}">{note}</text>')
    return _svg(row * len(ordered) + 10, body, "outcomes per intent") + legend()


def top_bars(topics: list[Topic]) -> str:
    row, left, right = 28, 420, 220
    top = max(t.count for t in topics)
    body = []
    for i, t in enumerate(topics):
        y = 5 + i * row
        w = max((WIDTH - left - right) * t.count / top, 1)
        body.append(
            f'<text x="0" y="{y + 16}"><title>{escape(t.questions[0])}</title>'
            f"{escape(shorten(t.questions[0]))}</text>"
        )
        body.append(
            f'<rect class="bar" x="{left}" y="{y}" width="{w:.1f}" height="{row - 8}"'
            f' fill="{OUTCOMES["gap"][1]}"><title>{escape(t.questions[0])}:'
            f" {plural(t.count, 'question')}</title></rect>"
        )
        note = f"{plural(t.count, 'question')} · {t.intent or 'no intent'}"
        body.append(f'<text x="{left + w + 8:.1f}" y="{y + 16}">{escape(note)}</text>')
    return _svg(row * len(topics) + 10, body, "top gaps")


def nearest(t: Topic) -> str:
    """The nearest doc (and section), linked when it has a web address."""
    if not t.doc:
        return "no doc near it"
    name = escape(t.doc + (f" › {t.section}" if t.section else ""))
    if t.url.startswith(("https://", "http://")):
        return f'<a href="{escape(t.url)}">{name}</a>'
    return f"<code>{name}</code>"


def state_of(t: Topic) -> str:
    """A topic's state in words, with its closure figures once it has them."""
    words = {"open": "open", "drafted": "drafted", "fixed": "fixed", "wontfix": "won't fix"}
    after = f" (answered {t.before} before, {t.after} after)" if t.after else ""
    return words.get(t.state, t.state) + after


def top_gaps(topics: list[Topic]) -> str:
    if not topics:
        return "<p>Every question in this period was answered.</p>"
    shown = topics[:TOP_GAPS]
    items = "".join(
        f"<li><b>{plural(t.count, 'question')}</b>"
        + (f" ({t.unsure} answered unsure)" if t.unsure else "")
        + f" like “{escape(t.questions[0])}” — {escape(KINDS[t.kind])}; nearest doc"
        f" {nearest(t)} ({escape(t.intent or 'no intent')}), owner"
        f' {escape(t.owner or "none")}, <span class="state">{escape(state_of(t))}</span>'
        + "".join(f'<p class="said">The answer said: “{escape(m)}”</p>' for m in t.missing)
        + "<ul>"
        + "".join(f"<li>{escape(q)}</li>" for q in t.questions[1:])
        + "</ul></li>"
        for t in shown
    )
    return top_bars(shown) + f'<ol class="gaps">{items}</ol>'


def period(rows: list[dict], since: str | None) -> str:
    """The days the report covers: from --since (or the first question) to the last question."""
    if not rows:
        return "No questions" + (f" since {since[:10]}." if since else ".")
    days = sorted(r["created"][:10] for r in rows)
    first = since[:10] if since else days[0]
    if first == days[-1]:
        return f"Questions asked on {first} (UTC)."
    return f"Questions asked from {first} to {days[-1]} (UTC)."


def render(
    rows: list[dict],
    topics: list[Topic],
    title: str,
    info: dict | None = None,
    since: str | None = None,
) -> str:
    """The whole page; `rows`: every audit row of the period, `topics`: its gaps, `info`: the
    clustering's figures (find_topics), `since`: the period's start when one was asked for."""
    info = info or {}
    outcomes = Counter(outcome(r) for r in rows)
    talk = info.get("small_talk", 0)
    left_out = (
        f" {plural(talk, 'message')} that said nothing the docs could answer (small talk:"
        " nearer an empty message than any doc) are left out of the gaps."
        if talk
        else ""
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title>
<style>{STYLE}</style><script>{SCRIPT}</script></head>
<body data-drawn="0">
<h1>{escape(title)}</h1>
<p class="period">{escape(period(rows, since))}</p>
<p>{plural(len(rows), "question")}: {outcomes["confirmed"]} answered and marked helpful,
{outcomes["unrated"]} answered but not rated, {outcomes["gap"]} not answered well (not in the
docs, partial, marked not helpful or handed to a person), in {plural(len(topics), "topic")}.
Only an answer someone marked helpful counts as covered: an answer nobody rated may be a
confident wrong one.{left_out}</p>
<h2>Questions per day</h2>
{per_day(rows)}
<h2>How each intent's questions fared</h2>
<p class="note">By the intent the router gave each question.</p>
{per_intent(rows)}
<h2>Top gaps</h2>
<p class="note">Questions not answered well, grouped by topic; each topic's intent and owner are
those of its nearest doc.</p>
{top_gaps(topics)}
<div id="errors"></div>
</body></html>
"""
