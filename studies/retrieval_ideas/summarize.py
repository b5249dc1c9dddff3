"""Print the CV tables of idea_a.json / idea_b.json.   python3 summarize.py idea_a.json"""

import json
import sys

for path in sys.argv[1:]:
    report = json.load(open(path))
    for name, fam in report["families"].items():
        cv = fam["cross_validated"]
        o, c5, a = cv["overall"], cv["category_5"], cv["categories_1_5"]
        cats = " ".join(f"{c}:{cv['by_category_pooled'][c]['R@10']:.3f}" for c in "1234")
        pr = fam["paired_vs_shipped"]
        print(f"{name}\n  CV R@5 {o['R@5']:.3f} R@10 {o['R@10']:.3f} {cv['R@10_interval_95']} Sany@10 {o['Sany@10']:.3f}"
              f" | {cats} | cat5 R@10 {c5['R@10']:.3f} | 1-5 R@10 {a['R@10']:.3f} Sany@10 {a['Sany@10']:.3f}")
        for k, v in pr.items():
            print(f"  paired {k}: {v['difference']:+.4f} {v['interval_95']} <=0: {v['share_of_draws_at_or_below_0']}")
        print("  folds:", [(f["held_out"], f["chosen"], f["held_out_metrics"]["overall"]["R@10"]) for f in fam["folds"]])
        ins = fam["in_sample"]
        print("  in-sample:", ins["chosen"], ins["overall"]["R@10"])
