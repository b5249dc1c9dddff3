"""Step 0: embed the split once (vectors.npz) and keep every question's candidates under the
shipped configuration with their signals (features.pkl), each top 10 checked against
memlib's rank_question.   cd /work/main && .venv/bin/python studies/retrieval_ideas/features.py"""

from common import build_features, metrics, shipped_rows, write

if __name__ == "__main__":
    features = build_features()
    rows = [r for conv in shipped_rows(features) for r in conv]
    write("shipped.json", metrics(rows))
