"""`fieldguide gaps --html FILE`: one self-contained page (inline SVG, no external script, style or
font) a docs owner can open or be sent: questions per day by decision, the answered share per
intent, and the top gaps. A small inline script marks the page once its plots have a drawn size
(`data-drawn` on <body>) and writes any script error or console.error into #errors (and
`data-errors` on <html>), so a browser test can read both from the DOM."""

from __future__ import annotations

from collections import Counter, defaultdict
from html import escape

from .gaps import Topic, top_intent

COLOURS = {"ANSWER": "#2e7d32", "PARTIAL": "#f9a825", "ABSTAIN": "#c62828"}
WIDTH = 720
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
  var drawn = 0;
  document.querySelectorAll('svg.plot').forEach(function (svg) {
    var box = svg.getBBox();
    if (box.width > 0 && box.height > 0 && svg.querySelectorAll('rect.bar').length) drawn++;
  });
  document.body.setAttribute('data-drawn', String(drawn));
});
"""

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; max-width: 760px; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
svg text { font: 12px system-ui, sans-serif; fill: #222; }
.legend span { display: inline-block; margin-right: 1em; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
#errors { color: #c62828; white-space: pre; }
"""


def _svg(height: int, body: list[str], label: str) -> str:
    return (
        f'<svg class="plot" role="img" aria-label="{escape(label)}" width="{WIDTH}"'
        f' height="{height}" viewBox="0 0 {WIDTH} {height}" xmlns="http://www.w3.org/2000/svg">'
        + "".join(body)
        + "</svg>"
    )


def per_day(rows: list[dict]) -> str:
    """Stacked bars: questions per day, by decision."""
    days: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        days[r["created"][:10]][r["decision"]] += 1
    if not days:
        return "<p>No questions in this period.</p>"
    order = sorted(days)
    top = max(sum(c.values()) for c in days.values())
    height, left, bottom = 220, 40, 40
    step = (WIDTH - left - 10) / len(order)
    body = [
        f'<line x1="{left}" y1="{height - bottom}" x2="{WIDTH - 10}" y2="{height - bottom}"'
        ' stroke="#999"/>',
        f'<text x="4" y="16">{top}</text>',
    ]
    for i, day in enumerate(order):
        y = float(height - bottom)
        x = left + i * step + step * 0.1
        for decision in ("ANSWER", "PARTIAL", "ABSTAIN"):
            n = days[day][decision]
            if not n:
                continue
            h = (height - bottom - 20) * n / top
            y -= h
            body.append(
                f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{step * 0.8:.1f}"'
                f' height="{h:.1f}" fill="{COLOURS[decision]}"><title>{day}: {n}'
                f" {decision.lower()}</title></rect>"
            )
        if len(order) <= 16 or i % max(1, len(order) // 8) == 0:
            body.append(f'<text x="{x:.1f}" y="{height - bottom + 16}">{day[5:]}</text>')
    legend = "".join(
        f'<span><i style="background:{c}"></i>{d.lower()}</span>' for d, c in COLOURS.items()
    )
    return _svg(height, body, "questions per day by decision") + f'<p class="legend">{legend}</p>'


def _hbars(items: list[tuple[str, float, str]], label: str, colour: str, top: float) -> str:
    """Horizontal bars: (name, value, text after the bar)."""
    row, left = 26, 200
    height = row * len(items) + 10
    body = []
    for i, (name, value, note) in enumerate(items):
        y = 5 + i * row
        w = (WIDTH - left - 160) * (value / top if top else 0)
        body.append(f'<text x="0" y="{y + 15}">{escape(name[:30])}</text>')
        body.append(
            f'<rect class="bar" x="{left}" y="{y}" width="{max(w, 1):.1f}" height="{row - 8}"'
            f' fill="{colour}"><title>{escape(name)}: {escape(note)}</title></rect>'
        )
        body.append(f'<text x="{left + max(w, 1) + 6:.1f}" y="{y + 15}">{escape(note)}</text>')
    return _svg(height, body, label)


def answered_share(rows: list[dict]) -> str:
    by_intent: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        by_intent[top_intent(r) or "(none)"][r["decision"]] += 1
    if not by_intent:
        return "<p>No questions in this period.</p>"
    items = []
    for intent, c in sorted(by_intent.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(c.values())
        share = c["ANSWER"] / total
        items.append((intent, share, f"{share:.0%} of {total}"))
    return _hbars(items, "answered share per intent", COLOURS["ANSWER"], 1.0)


def top_gaps(topics: list[Topic]) -> str:
    if not topics:
        return "<p>Every question in this period was answered.</p>"
    shown = topics[:TOP_GAPS]
    bars = _hbars(
        [(t.questions[0], t.count, f"{t.count} · {t.intent or '-'}") for t in shown],
        "top gaps",
        COLOURS["ABSTAIN"],
        max(t.count for t in shown),
    )
    items = "".join(
        f"<li><b>{t.count}</b> questions like “{escape(t.questions[0])}” — nearest doc"
        f" <code>{escape(t.doc or '-')}</code> ({escape(t.intent or '-')}),"
        f" owner {escape(t.owner or 'none')}<ul>"
        + "".join(f"<li>{escape(q)}</li>" for q in t.questions[1:])
        + "</ul></li>"
        for t in shown
    )
    return bars + f"<ol>{items}</ol>"


def render(rows: list[dict], topics: list[Topic], title: str) -> str:
    """The whole page; `rows`: every audit row of the period, `topics`: its gaps."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>{STYLE}</style><script>{SCRIPT}</script></head>
<body data-drawn="0">
<h1>{escape(title)}</h1>
<p>{len(rows)} questions; {sum(t.count for t in topics)} not answered well (not in the docs,
partial, marked not helpful or handed to a person), in {len(topics)} topics.</p>
<h2>Questions per day, by decision</h2>
{per_day(rows)}
<h2>Answered share per intent</h2>
{answered_share(rows)}
<h2>Top gaps</h2>
{top_gaps(topics)}
<div id="errors"></div>
</body></html>
"""
