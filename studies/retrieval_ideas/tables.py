"""Markdown tables of the study's JSON (what h6-retrieval-section.md shows).

    python3 studies/retrieval_ideas/tables.py idea_a.json idea_b.json"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def iv(pair):
    return f"{pair[0]:+.3f} – {pair[1]:+.3f}".replace("+0.000 ", "0.000 ")


def choice(fold):
    c = {k: v for k, v in fold["chosen"].items() if k not in ("family", "pool")}
    return ",".join(f"{v}" for v in c.values()) or "none"


for name in sys.argv[1:]:
    report = json.loads((HERE / name).read_text())
    print(f"\n{name} ({report['vectors']} vectors)\n")
    print("| variant | R@5 | R@10 (95%) | Sany@10 | multi-hop | temporal | open-dom. | single-hop | 1–5: R@10 | 1–5: Sany@10 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for fam, r in report["families"].items():
        cv = r["cross_validated"]
        o, a = cv["overall"], cv["categories_1_5"]
        cats = " | ".join(f"{cv['by_category_pooled'][c]['R@10']:.3f}" for c in "1234")
        lo, hi = cv["R@10_interval_95"]
        print(f"| {fam} | {o['R@5']:.3f} | {o['R@10']:.3f} ({lo:.3f}–{hi:.3f}) | {o['Sany@10']:.3f} | {cats} | {a['R@10']:.3f} | {a['Sany@10']:.3f} |")
    print()
    print("| variant − shipped | R@10 1–4 (95%) | draws ≤ 0 | Sany@10 1–4 (95%) | R@10 cat. 5 (95%) | R@10 1–5 (95%) | folds' choices |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for fam, r in report["families"].items():
        p = r["paired_vs_shipped"]
        f = lambda k: f"{p[k]['difference']:+.4f} ({iv(p[k]['interval_95'])})"
        choices = "; ".join(choice(x) for x in r["folds"])
        print(f"| {fam} | {f('R@10 1-4')} | {p['R@10 1-4']['share_of_draws_at_or_below_0']:.0%} | {f('Sany@10 1-4')} | {f('R@10 5')} | {f('R@10 1-5')} | {choices} |")
