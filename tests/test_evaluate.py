from bot.evaluation.retrieval import paired_difference


def rows(values: list[float | None], key: str = "mrr@10") -> list[dict]:
    return [{key: v, "intent_hit@1": True} for v in values]


def test_paired_difference_is_the_mean_per_question_gain_with_a_seeded_interval():
    routed = rows([1.0, 0.5, 1.0, 0.0, 1.0, 1.0, None])
    hybrid = rows([0.5, 0.5, 1.0, 0.0, 1.0, 0.0, None])
    p = paired_difference(routed, hybrid, "routed", "hybrid")
    assert p["metric"] == "mrr@10" and p["questions"] == 6  # the question without gold is left out
    assert p["difference"] == round(1.5 / 6, 4) and (p["better"], p["worse"]) == (2, 0)
    lo, hi = p["ci95"]
    assert 0.0 <= lo <= p["difference"] <= hi <= 1.0  # nothing got worse: the interval stays >= 0
    assert paired_difference(routed, hybrid, "routed", "hybrid") == p  # seeded: same every run


def test_sets_without_gold_sections_compare_intent_hit_at_1():
    a = [{"mrr@10": None, "intent_hit@1": h} for h in (True, False, True, True)]
    b = [{"mrr@10": None, "intent_hit@1": h} for h in (True, True, False, False)]
    p = paired_difference(a, b, "routed", "hybrid")
    assert p["metric"] == "intent_hit@1" and p["difference"] == 0.25
    assert (p["better"], p["worse"]) == (2, 1) and p["ci95"][0] < 0 < p["ci95"][1]
